// Shared helpers of the `dgemma serve` client tests: result lines in the
// style of tests/cli/*.sh ("ok   ..." / "FAIL ..."), metrics scraping.
export let passed = 0;
export let failed = 0;

export function ok(name) {
  passed++;
  console.log(`ok   ${name}`);
}

export function bad(name) {
  failed++;
  console.log(`FAIL ${name}`);
}

export function check(cond, name, detail = '') {
  if (cond) ok(name);
  else bad(detail ? `${name}: ${detail}` : name);
  return cond;
}

// Runs `fn`, turning an exception into a failed check (the run goes on).
export async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    bad(`${name}: threw ${e && e.stack ? e.stack : e}`);
  }
}

export async function metric(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.slice(name.length + 1));
}

export async function waitFor(pred, timeoutMs, intervalMs = 50) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await pred()) return true;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return pred();
}

export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
