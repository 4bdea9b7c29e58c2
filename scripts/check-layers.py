#!/usr/bin/env python3
"""Fails on an #include that runs up or sideways against the layer table of
docs/architecture.md §1, on a source folder that belongs to no layer, and on a
namespace a layer may not open (the namespace table of docs/architecture.md
§2.1).

Each quoted include "a/b/c.h" is resolved to the layer whose folder holds it
(the longest folder that matches); the including file's layer must be that
layer or list it under "may include". System includes (<...>) and includes of
a file in the same folder without a path are not checked.
"""
import os
import re
import sys

from source_tree import ROOT, files, report

SOURCE_EXT = ('.h', '.cc', '.cu', '.cuh', '.inc')


def read_layers(path):
    text = open(path, encoding='utf-8').read()
    m = re.search(r'<!-- layers:begin.*?-->(.*?)<!-- layers:end -->', text, re.S)
    if not m:
        sys.exit(f'{path}: no layer table between <!-- layers:begin --> and <!-- layers:end -->')
    layers = []  # (name, [folders], set(deps))
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        folders = re.findall(r'`([^`]+)`', cells[2])
        deps = set() if cells[3] in ('—', '-', '') else set(cells[3].split())
        layers.append((cells[1], folders, deps))
    names = [l[0] for l in layers]
    for i, (name, _, deps) in enumerate(layers):
        for d in deps:
            if d not in names:
                sys.exit(f'{path}: layer {name} may include unknown layer {d}')
            if names.index(d) >= i:
                sys.exit(f'{path}: layer {name} lists {d}, which is not below it')
    return layers


def read_namespaces(path, layer_names):
    text = open(path, encoding='utf-8').read()
    m = re.search(r'<!-- namespaces:begin.*?-->(.*?)<!-- namespaces:end -->', text, re.S)
    if not m:
        sys.exit(f'{path}: no namespace table between <!-- namespaces:begin --> and <!-- namespaces:end -->')
    allowed = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) != 2 or cells[0] not in layer_names:
            continue
        allowed[cells[0]] = re.findall(r'`([^`]+)`', cells[1])
    missing = [n for n in layer_names if n not in allowed]
    if missing:
        sys.exit(f'{path}: the namespace table has no row for layer(s) {" ".join(missing)}')
    return allowed


NAMESPACE_OPEN = re.compile(r'\s*(?:inline\s+)?namespace\s*([A-Za-z_][\w:]*)?\s*\{')
CODE_NOISE = re.compile(r'//.*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')


def namespace_errors(rel, layer, allowed):
    """Follows the braces of the file (comments, strings and character
    literals aside) and checks the full name of every named namespace it opens."""
    def permitted(path):
        return any(path == a or (a != 'dgemma' and path.startswith(a + '::')) for a in allowed)
    errors = []
    stack = []  # (name or '' for anonymous, brace depth inside it)
    depth = 0
    in_block_comment = False
    for n, raw in enumerate(open(os.path.join(ROOT, rel), encoding='utf-8', errors='replace'), 1):
        line = raw
        if in_block_comment:
            if '*/' not in line:
                continue
            line = line[line.index('*/') + 2:]
            in_block_comment = False
        m = NAMESPACE_OPEN.match(line)
        code = CODE_NOISE.sub('', line)
        if '/*' in code:
            code = code[:code.index('/*')]
            in_block_comment = True
        if m:
            depth += 1
            stack.append((m.group(1) or '', depth))
            path = '::'.join(name for name, _ in stack if name)
            if m.group(1) and not permitted(path):
                errors.append(f'{rel}:{n}: layer {layer} opens namespace {path}; it may open '
                              f'{", ".join(allowed)} (docs/architecture.md §2.1)')
            code = code[code.index('{') + 1:]
        for ch in code:
            if ch == '{':
                depth += 1
            elif ch == '}':
                if stack and stack[-1][1] == depth:
                    stack.pop()
                depth -= 1
    return errors


def main():
    layers = read_layers(os.path.join(ROOT, 'docs', 'architecture.md'))
    namespaces = read_namespaces(os.path.join(ROOT, 'docs', 'architecture.md'), [l[0] for l in layers])
    # Include paths are relative to src/, testing/ and include/ (the roots).
    def include_key(folder):
        for root in ('src/', 'testing/', 'include/'):
            if folder.startswith(root):
                return folder[len(root):]
        return None
    owners = []  # (folder relative to repo, include prefix, layer)
    for name, folders, _ in layers:
        for f in folders:
            owners.append((f, include_key(f), name))
    owners.sort(key=lambda o: -len(o[0]))
    deps = {name: d for name, _, d in layers}

    def layer_of_file(rel):
        for folder, _, name in owners:
            if rel.startswith(folder + '/') and '/' not in rel[len(folder) + 1:]:
                return name
        return None

    def layer_of_include(inc):
        for _, key, name in owners:
            if key and inc.startswith(key + '/') and '/' not in inc[len(key) + 1:]:
                return name
        return None

    errors = []
    unowned = set()
    for rel in files(('src', 'testing', 'tools', 'include'), SOURCE_EXT):
        rel_dir = os.path.dirname(rel)
        me = layer_of_file(rel)
        if me is None:
            if rel_dir not in unowned:
                errors.append(f'{rel}: its folder {rel_dir} belongs to no layer of docs/architecture.md §1')
                unowned.add(rel_dir)
            continue
        errors += namespace_errors(rel, me, namespaces[me])
        for n, line in enumerate(open(os.path.join(ROOT, rel), encoding='utf-8', errors='replace'), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m or '/' not in m.group(1):
                continue
            inc = m.group(1)
            if inc.startswith('../') or '/../' in inc:
                errors.append(f'{rel}:{n}: "{inc}" reaches out of its folder; include by the layer path '
                              f'(docs/architecture.md §1)')
                continue
            target = layer_of_include(inc)
            if target is None:
                if not os.path.exists(os.path.join(ROOT, rel_dir, inc)):
                    errors.append(f'{rel}:{n}: "{inc}" is in no layer of docs/architecture.md §1')
            elif target != me and target not in deps[me]:
                errors.append(f'{rel}:{n}: layer {me} includes "{inc}" of layer {target}, '
                              f'which {me} may not include (docs/architecture.md §1)')
    return report('check-layers', errors, f'{len(layers)} layers, every include runs downward, every namespace is its layer\'s')


if __name__ == '__main__':
    sys.exit(main())
