/**
 * The file a worker thread (the signing pool's, the SQLite store's) runs. Herald runs
 * either from its TypeScript sources under tsx (the tests, the scripts: every module ends
 * in `.ts`) or compiled (dist/, `.js`), and a worker must match the module that starts it:
 * compiled code starts compiled workers, which need no loader, and sources start source
 * workers, which load through tsx (see `workerExecArgv`). The compiler rewrites import
 * specifiers only, not the paths given to `new Worker`, so the extension is taken from the
 * starting module's own URL.
 */

/** `name` (a relative path without extension) next to `from` (an `import.meta.url`), with from's extension. */
export function workerModule(from: string, name: string): URL {
  return new URL(`${name}${isTypeScriptModule(from) ? '.ts' : '.js'}`, from);
}

/** Whether a module's file is TypeScript source, which Node loads only through tsx. */
export function isTypeScriptModule(file: URL | string): boolean {
  return (typeof file === 'string' ? new URL(file) : file).pathname.endsWith('.ts');
}
