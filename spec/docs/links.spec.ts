/**
 * The documentation stands alone and stays true to the repository: every
 * relative link of README.md, CONTRIBUTING.md and docs/*.md reaches a file
 * (and, with a #fragment, a heading of that file, by GitHub's slug), and every
 * repository file or folder a page names in backticks (`lib/engine/actor.ts`,
 * `lib/engine/`) exists.
 * A file moved without its docs fails here, naming the page and the path.
 * No network: links with a scheme (https:, mailto:) are not followed.
 */
import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_MAX_LINES = 300;

/** A page's text split into prose (code removed) and code (fenced blocks and inline spans). */
interface PageParts {
  readonly prose: string;
  readonly code: readonly string[];
}

function splitCode(text: string): PageParts {
  const prose: string[] = [];
  const code: string[] = [];
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker !== undefined) {
      fence = marker;
      prose.push('');
    } else if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      else code.push(line);
      prose.push('');
    } else {
      prose.push(line);
    }
  }
  // Inline code may span lines within a paragraph; it is blanked out of the prose so that a
  // link written inside code is not taken for a link.
  const withoutSpans = prose.join('\n').replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (_span, _ticks: string, inner: string) => {
    code.push(inner);
    return ' '.repeat(inner.length);
  });
  return { prose: withoutSpans, code };
}

/** GitHub's anchor for a heading: lower case, only letters, digits, spaces, hyphens and underscores kept, spaces to hyphens. */
function githubSlug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings, a repeated heading numbered as GitHub does (`-1`, `-2`). */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of splitCode(text).prose.split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = githubSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** How the checks reach files: the repository on disk, or a few pages in memory for the checks' own spec. */
interface Files {
  read(path: string): string | undefined;
  exists(path: string): boolean;
}

const LINK = /!?\[((?:[^[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;

/** Every relative link of `page` (a path from the repository root) that reaches no file or no heading. */
function brokenLinks(page: string, files: Files): string[] {
  const text = files.read(page) ?? '';
  const problems: string[] = [];
  for (const [, , target] of splitCode(text).prose.matchAll(LINK)) {
    if (target === undefined || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const hash = target.indexOf('#');
    const path = hash === -1 ? target : target.slice(0, hash);
    const fragment = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const file = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
    if (file.startsWith('..')) {
      problems.push(`${page}: ${target} leaves the repository`);
    } else if (!files.exists(file)) {
      problems.push(`${page}: ${target} (no file ${file})`);
    } else if (fragment !== undefined) {
      const anchors = file.endsWith('.md') ? anchorsOf(files.read(file) ?? '') : new Set<string>();
      if (!anchors.has(fragment)) problems.push(`${page}: ${target} (no heading #${fragment} in ${file})`);
    }
  }
  return problems;
}

const REPOSITORY_PATH = /(?<![\w./-])(?:lib|spec|scripts|docs|config)\/[\w./-]*\.[A-Za-z0-9]+(?![\w/-])/g;

/** A code span that is a folder of the repository and nothing else: `lib/engine/`. */
const REPOSITORY_FOLDER = /^(?:lib|spec|scripts|docs|config)\/(?:[\w.-]+\/)*$/;

/**
 * Every repository path named in `page`'s code that does not exist: a file (lib/, spec/,
 * scripts/, docs/, config/, with an extension) anywhere in code, or a folder that is a whole span.
 */
function missingPaths(page: string, files: Files): string[] {
  const problems = new Set<string>();
  for (const code of splitCode(files.read(page) ?? '').code) {
    const folder = REPOSITORY_FOLDER.exec(code.trim())?.[0];
    if (folder !== undefined && !files.exists(folder.slice(0, -1))) problems.add(`${page}: \`${folder}\` does not exist`);
    for (const [path] of code.matchAll(REPOSITORY_PATH)) {
      if (!files.exists(path)) problems.add(`${page}: \`${path}\` does not exist`);
    }
  }
  return [...problems];
}

const repository: Files = {
  read: (path) => (existsSync(join(ROOT, path)) ? readFileSync(join(ROOT, path), 'utf8') : undefined),
  exists: (path) => existsSync(join(ROOT, path)),
};

function documentationPages(): string[] {
  const docs = readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs.sort()];
}

function inMemory(pages: Record<string, string>): Files {
  return { read: (path) => pages[path], exists: (path) => Object.hasOwn(pages, path) };
}

describe('Documentation (README.md, CONTRIBUTING.md, docs/)', () => {
  context('in this repository', () => {
    it('has a README of at most 300 lines', () => {
      const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
      expect(lines, 'README.md lines').to.be.at.most(README_MAX_LINES);
    });

    it('has every relative link reach its file and heading', () => {
      expect(documentationPages().flatMap((page) => brokenLinks(page, repository))).to.deep.equal([]);
    });

    it('names only repository paths that exist', () => {
      expect(documentationPages().flatMap((page) => missingPaths(page, repository))).to.deep.equal([]);
    });

    it('never sends a reader outside the repository (../shared/)', () => {
      const outside = documentationPages().filter((page) => repository.read(page)?.includes('../shared/'));
      expect(outside).to.deep.equal([]);
    });
  });

  context('when a page links to a missing file or heading', () => {
    it('names each broken link and leaves the good ones alone', () => {
      const files = inMemory({
        'README.md': [
          '# Herald',
          'See [the API](docs/API.md#the-admin-api), [tokens](docs/API.md#tokens), [gone](docs/GONE.md),',
          '[here](#herald), [nowhere](#nowhere), [the web](https://example.com/x#y) and `[code](docs/NOT.md)`.',
        ].join('\n'),
        'docs/API.md': '# The admin API\n\n## Tenant tokens\n',
      });
      expect(brokenLinks('README.md', files)).to.deep.equal([
        'README.md: docs/API.md#tokens (no heading #tokens in docs/API.md)',
        'README.md: docs/GONE.md (no file docs/GONE.md)',
        'README.md: #nowhere (no heading #nowhere in README.md)',
      ]);
    });
  });

  context('when a page names a repository path in code', () => {
    it('reports the files and folders that do not exist, in inline code and in code blocks', () => {
      const files = inMemory({
        'docs/X.md': 'The actor (`lib/engine/actor.ts`), `lib/engine/gone.ts`, `lib/engine/`, `lib/status/` and `node lib/x`:\n\n```sh\nnpx tsx scripts/old.ts\n```\n',
        'lib/engine/actor.ts': '',
        'lib/engine': '',
      });
      expect(missingPaths('docs/X.md', files)).to.have.members([
        'docs/X.md: `lib/engine/gone.ts` does not exist',
        'docs/X.md: `lib/status/` does not exist',
        'docs/X.md: `scripts/old.ts` does not exist',
      ]);
    });
  });

  context('when a heading is turned into its anchor', () => {
    it('follows GitHub: punctuation dropped, letters such as µ kept, links reduced to their text', () => {
      expect(githubSlug('Where each µs goes: the CPU account')).to.equal('where-each-µs-goes-the-cpu-account');
      expect(githubSlug('Rate limit, per endpoint')).to.equal('rate-limit-per-endpoint');
      expect(githubSlug('`herald start` and [the API](API.md)')).to.equal('herald-start-and-the-api');
      expect([...anchorsOf('## Peers\n\n## Peers\n```\n# not a heading\n```\n')]).to.deep.equal(['peers', 'peers-1']);
    });
  });
});

