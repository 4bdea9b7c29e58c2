#!/usr/bin/env python3
"""Fails on a comment that cites a document the repository does not carry.

- `docs/NAME.md` must exist, and each section it is cited with
  (`docs/NAME.md §3.2`, `§2-§4`, `§§2.2, 2.3`) must be a numbered heading of
  that file (`## 3. Title`, `### 3.2 Title`).
- No citation of an issue tracker ("issue 15"), of the team's notes outside
  the repository ("../shared", "spec §", an absolute path into a work tree).
Checked: every tracked or new file under src/, testing/, tools/, tests/
(except tests/data/ data files), bench/, fuzz/, include/, scripts/, cmake/.
"""
import os
import re
import sys

from source_tree import ROOT, files, report

TOPS = ('src/', 'testing/', 'tools/', 'tests/', 'bench/', 'fuzz/', 'include/', 'scripts/', 'cmake/')
TEXT_EXT = ('.h', '.cc', '.cu', '.cuh', '.sh', '.py', '.cmake', '.in', '.txt', '.md', '.js', '.mjs')
CITE = re.compile(r'docs/([A-Za-z0-9_-]+\.md)((?:[ ,]*(?:and |or )?§§?\s?[0-9]+(?:\.[0-9]+)*(?:\s?[-–]\s?§?[0-9]+(?:\.[0-9]+)*)?)*)')
SECTION = re.compile(r'[0-9]+(?:\.[0-9]+)*')
FORBIDDEN = [
    (re.compile(r'\bissues? #?[0-9]+', re.I), 'cites an issue number (say the reason instead)'),
    (re.compile(r'\(issue:'), 'cites an issue by name (say the reason instead)'),
    (re.compile(r'\.\./shared|/work/|\bshared/(spec|golden|anchors|tokenizer)\b'), 'cites a document outside the repository'),
    (re.compile(r'\bspec §|\bspec/[a-z-]+\.md|(//|#).*\bspec$'), 'cites the team notes ("spec"); cite docs/NAME.md §N'),
]


def headings(path):
    nums = set()
    for line in open(path, encoding='utf-8'):
        m = re.match(r'#+\s+([0-9]+(?:\.[0-9]+)*)\.?\s', line)
        if m:
            nums.add(m.group(1))
    return nums


def main():
    cache = {}
    errors = []
    cited = 0
    for f in files(TOPS, TEXT_EXT):
        if f.startswith('tests/data/') and not f.endswith('README.md') or f == 'scripts/check-docs.py':
            continue
        path = os.path.join(ROOT, f)
        for n, line in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
            for pat, why in FORBIDDEN:
                if pat.search(line):
                    errors.append(f'{f}:{n}: {why}: {line.strip()[:120]}')
            for m in CITE.finditer(line):
                cited += 1
                doc = os.path.join(ROOT, 'docs', m.group(1))
                if not os.path.isfile(doc):
                    errors.append(f'{f}:{n}: cites docs/{m.group(1)}, which does not exist')
                    continue
                if doc not in cache:
                    cache[doc] = headings(doc)
                for sec in SECTION.findall(m.group(2)):
                    if sec not in cache[doc]:
                        errors.append(f'{f}:{n}: cites docs/{m.group(1)} §{sec}, which has no such section')
    return report('check-docs', errors, f'{cited} citations of docs/, every one names a file and section that exist')


if __name__ == '__main__':
    sys.exit(main())
