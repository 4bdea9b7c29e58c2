"""What the repository's checks (check-layers.py, check-docs.py) share: the
files they read and how they report."""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def files(tops, extensions):
    """Tracked and new (not ignored) files under the folders `tops` whose names
    end in one of `extensions`, as paths relative to the repository."""
    out = subprocess.check_output(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '--', *tops],
                                  cwd=ROOT, text=True)
    return sorted(f for f in out.split('\n')
                  if f.endswith(tuple(extensions)) and os.path.isfile(os.path.join(ROOT, f)))


def report(tool, errors, ok):
    """Prints the errors and a summary line; the exit status (1 on errors)."""
    for e in errors:
        print(e)
    if errors:
        print(f'{tool}: {len(errors)} problem(s)')
        return 1
    print(f'{tool}: {ok}')
    return 0
