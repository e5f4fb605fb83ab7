/**
 * What a chart drew, read from its canvas in the browser: the chart specs check that a line or a
 * point of a given colour is there, not only that a canvas exists.
 */
import type { Page } from 'playwright-core';

/** The opaque pixels of the first canvas matching `selector` within 40 (summed over R, G, B) of `rgb`. */
export function canvasPixels(page: Page, selector: string, rgb: readonly [number, number, number]): Promise<number> {
  return page.evaluate(`(() => {
    const canvas = document.querySelector(${JSON.stringify(selector)}); const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    const want = ${JSON.stringify(rgb)}; let n = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3] < 200) continue;
      if (Math.abs(data[i] - want[0]) + Math.abs(data[i + 1] - want[1]) + Math.abs(data[i + 2] - want[2]) < 40) n++;
    }
    return n; })()`) as Promise<number>;
}

/** The colours the charts draw with (lib/api/delivery-charts.ts). */
export const CHART_COLOURS = {
  delivered: [10, 125, 44],
  latencyP50: [31, 111, 235],
  latencyP95: [130, 80, 223],
} as const;
