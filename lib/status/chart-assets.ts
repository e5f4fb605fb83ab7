/**
 * The files the dashboard's charts load from Herald itself, never from a CDN: uPlot's script and
 * stylesheet, read from the installed npm package `uplot` once, when first asked for, and served
 * with a content type, an ETag (a hash of the bytes) and a day of caching.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

export interface StaticAsset {
  readonly body: Buffer;
  readonly contentType: string;
  /** A strong ETag: the SHA-256 of the bytes, quoted. */
  readonly etag: string;
}

/** URL path → the package file it serves and its type. */
const ASSETS: Readonly<Record<string, { readonly file: string; readonly contentType: string }>> = Object.freeze({
  '/assets/uplot.iife.min.js': { file: 'uplot/dist/uPlot.iife.min.js', contentType: 'text/javascript; charset=utf-8' },
  '/assets/uplot.min.css': { file: 'uplot/dist/uPlot.min.css', contentType: 'text/css; charset=utf-8' },
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
    const body = readFileSync(resolvePackageFile(spec.file));
    asset = { body, contentType: spec.contentType, etag: `"${createHash('sha256').update(body).digest('base64url')}"` };
    loaded.set(path, asset);
  }
  return asset;
}
