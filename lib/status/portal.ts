export function portalHtml(): string {
  return '<!doctype html><title>Herald portal</title>';
}
