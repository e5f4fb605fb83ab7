/**
 * The files the delivery charts (dashboard and portal) load from Herald itself, never from a CDN:
 * uPlot's script and stylesheet, read from the installed npm package `uplot` once, when first asked
 * for, and Herald's own chart script (`delivery-charts.ts`); each served with a content type, an
 * ETag (a hash of the bytes) and a day of caching.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { DELIVERY_CHARTS_SCRIPT, DELIVERY_CHARTS_SCRIPT_PATH } from './delivery-charts.ts';

export interface StaticAsset {
  readonly body: Buffer;
  readonly contentType: string;
  /** A strong ETag: the SHA-256 of the bytes, quoted. */
  readonly etag: string;
}

/** Where an asset's bytes come from: a file of an installed package, or a text of Herald's own. */
type AssetSource = { readonly packageFile: string } | { readonly text: string };

const JAVASCRIPT = 'text/javascript; charset=utf-8';

/** URL path → what it serves and its type. */
const ASSETS: Readonly<Record<string, { readonly source: AssetSource; readonly contentType: string }>> = Object.freeze({
  '/assets/uplot.iife.min.js': { source: { packageFile: 'uplot/dist/uPlot.iife.min.js' }, contentType: JAVASCRIPT },
  '/assets/uplot.min.css': { source: { packageFile: 'uplot/dist/uPlot.min.css' }, contentType: 'text/css; charset=utf-8' },
  [DELIVERY_CHARTS_SCRIPT_PATH]: { source: { text: DELIVERY_CHARTS_SCRIPT }, contentType: JAVASCRIPT },
});

/** How long a browser may use an asset without asking again; after that the ETag makes asking cheap. */
export const ASSET_CACHE_CONTROL = 'public, max-age=86400';

const resolvePackageFile = createRequire(import.meta.url).resolve;
const loaded = new Map<string, StaticAsset>();

export function chartAssetPaths(): readonly string[] {
  return Object.keys(ASSETS);
}

/** The asset served at `path`, read on first use. @throws when the `uplot` package is not installed. */
export function chartAsset(path: string): StaticAsset {
  let asset = loaded.get(path);
  if (asset === undefined) {
    const spec = ASSETS[path];
    if (spec === undefined) throw new Error(`no asset at ${path}`);
    const { source } = spec;
    const body = 'text' in source ? Buffer.from(source.text, 'utf8') : readFileSync(resolvePackageFile(source.packageFile));
    asset = { body, contentType: spec.contentType, etag: `"${createHash('sha256').update(body).digest('base64url')}"` };
    loaded.set(path, asset);
  }
  return asset;
}
