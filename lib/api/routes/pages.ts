/**
 * The pages: the dashboard (`/`), the tenants' portal (`/portal`) and their
 * chart library (`/assets/…`), open to anyone; a page asks for a token and
 * calls the API with it.
 */
import { chartAsset, chartAssetPaths } from '../chart-assets.ts';
import { dashboardHtml } from '../dashboard.ts';
import { portalHtml } from '../portal.ts';
import type { Router } from '../router.ts';

export function pageRoutes(router: Router): void {
  router.route('GET', '/', async () => ({ status: 200, html: dashboardHtml() }), 'open');
  router.route('GET', '/portal', async () => ({ status: 200, html: portalHtml() }), 'open');
  for (const path of chartAssetPaths()) router.route('GET', path, async () => ({ status: 200, asset: chartAsset(path) }), 'open');
}
