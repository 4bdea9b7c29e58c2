// `dgemma serve` under hostile traffic, over loopback (docs/server.md §2):
//   traffic BASE MODEL PID  (a server with a short queue)
//     1. a burst of 100 simultaneous completion requests: each gets 200 or
//        429 with Retry-After, none a connection reset;
//     2. 120 connections that send one header line per second for 12 s:
//        /health answers every probe within 2 s meanwhile, and a chat
//        request is served;
//     3. 30 simultaneous prompts of 900,000 characters: each 400 at once, and
//        the server's resident memory grows by less than 300 MB;
//     4. raw HTTP: Content-Length -5 → 400 and 10^15 → 413 within a second,
//        two pipelined requests → two answers in order, Expect:
//        100-continue → "100 Continue" then the answer, a chunked body.
//   limits BASE  (a server with --request-timeout 2 --max-connections-per-client 8)
//     5. a request that never completes gets 408 after about 2 s;
//     6. a ninth connection from one address gets 429 while eight are open.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { check, finish, step } from './common.mjs';

const [mode, base, ...rest] = process.argv.slice(2);
const url = new URL(base);
const port = Number(url.port);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One request on its own connection: {status, headers, body, ms} or {error}.
function request(method, path, body, timeoutMs = 60000) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request(
      { host: url.hostname, port, method, path, agent: false, timeout: timeoutMs,
        headers: body === undefined ? {} : { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data, ms: performance.now() - t0 }));
        res.on('error', (e) => resolve({ error: e.code || String(e), ms: performance.now() - t0 }));
      });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ error: e.code || e.message, ms: performance.now() - t0 }));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

// Raw bytes over one socket. `script` is a list of strings (written) and
// numbers (milliseconds to wait); resolves with everything read once the
// server closes, `until(data)` holds, or timeoutMs passes.
function raw(script, { timeoutMs = 5000, until = () => false } = {}) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let data = '';
    let done = false;
    const sock = net.connect(port, url.hostname);
    const end = (why) => {
      if (done) return;
      done = true;
      sock.destroy();
      resolve({ data, why, ms: performance.now() - t0 });
    };
    const timer = setTimeout(() => end('timeout'), timeoutMs);
    sock.setEncoding('latin1');
    sock.on('data', (c) => {
      data += c;
      if (until(data)) {
        clearTimeout(timer);
        end('until');
      }
    });
    sock.on('close', () => {
      clearTimeout(timer);
      end('closed');
    });
    sock.on('error', () => {});
    sock.on('connect', async () => {
      for (const s of script) {
        if (done) return;
        if (typeof s === 'number') await sleep(s);
        else sock.write(s, 'latin1');
      }
    });
  });
}

// Status lines (a response may follow the previous body without a newline).
const statuses = (data) => [...data.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

async function traffic(model, pid) {
  await step('a burst of 100 simultaneous requests', async () => {
    const body = JSON.stringify({ model, prompt: 'Burst', max_tokens: 32, seed: 1 });
    const all = await Promise.all(Array.from({ length: 100 }, () => request('POST', '/v1/completions', body)));
    const count = (s) => all.filter((r) => r.status === s).length;
    const others = all.filter((r) => r.status !== 200 && r.status !== 429);
    console.log(`     burst: ${count(200)} x 200, ${count(429)} x 429, ${others.length} other`);
    check(others.length === 0, 'every burst request gets 200 or 429 (no reset, no other status)',
          JSON.stringify(others.slice(0, 3)));
    check(count(429) > 0 && count(200) > 0, 'the burst fills the queue: some are served, the rest get 429',
          `${count(200)} x 200, ${count(429)} x 429`);
    check(all.filter((r) => r.status === 429).every((r) => r.headers['retry-after'] === '1' &&
                                                             JSON.parse(r.body).error.type === 'rate_limit_error'),
          'every 429 has Retry-After and a JSON rate_limit_error');
  });

  await step('120 slow-header connections', async () => {
    const slow = [];
    let stop = false;
    for (let i = 0; i < 120; i++) {
      const s = net.connect(port, url.hostname);
      s.on('error', () => {});
      s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n');
      slow.push(s);
    }
    const drip = (async () => {
      for (let k = 0; !stop; k++) {
        for (const s of slow) if (!s.destroyed) s.write(`X-Slow-${k}: y\r\n`);
        await sleep(1000);
      }
    })();
    const probes = [];
    let chat = null;
    const chatDone = request('POST', '/v1/chat/completions',
                             JSON.stringify({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 }))
                       .then((r) => (chat = r));
    const t0 = Date.now();
    while (Date.now() - t0 < 12000) {
      probes.push(await request('GET', '/health', undefined, 5000));
      await sleep(250);
    }
    await chatDone;
    stop = true;
    await drip;
    const open = slow.filter((s) => !s.destroyed && s.readyState === 'open').length;
    for (const s of slow) s.destroy();
    const worst = Math.max(...probes.map((p) => p.ms));
    console.log(`     ${probes.length} /health probes, slowest ${worst.toFixed(0)} ms; chat ${chat.status} in ${chat.ms.toFixed(0)} ms; ${open} slow connections still open`);
    check(probes.every((p) => p.status === 200 && p.ms < 2000), '/health answers every probe within 2 s',
          JSON.stringify(probes.filter((p) => !(p.status === 200 && p.ms < 2000)).slice(0, 3)));
    check(chat.status === 200, 'a chat request is served while they dawdle', JSON.stringify(chat).slice(0, 300));
    check(open === 120, 'the slow connections were kept (within --request-timeout), not dropped', `${open} open`);
  });

  await step('30 refused prompts of 900,000 characters', async () => {
    const before = rssMb(pid);
    const body = JSON.stringify({ model, prompt: 'a'.repeat(900000), max_tokens: 4 });
    const all = await Promise.all(Array.from({ length: 30 }, () => request('POST', '/v1/completions', body)));
    const after = rssMb(pid);
    console.log(`     resident memory ${before.toFixed(0)} -> ${after.toFixed(0)} MB; slowest answer ${Math.max(...all.map((r) => r.ms)).toFixed(0)} ms`);
    check(all.every((r) => r.status === 400 && JSON.parse(r.body).error.code === 'context_length_exceeded'),
          'each gets 400 context_length_exceeded', JSON.stringify(all[0]).slice(0, 300));
    check(after - before < 300, 'resident memory grows by less than 300 MB', `${(after - before).toFixed(0)} MB`);
  });

  await step('raw HTTP framing', async () => {
    const neg = await raw(['POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n']);
    check(statuses(neg.data)[0] === 400 && neg.ms < 1000, 'Content-Length -5 gets 400 at once',
          `${neg.data.slice(0, 80)} after ${neg.ms.toFixed(0)} ms`);
    const huge = await raw(['POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\n']);
    check(statuses(huge.data)[0] === 413 && huge.ms < 1000 && huge.data.includes('"request_too_large"'),
          'Content-Length 10^15 without a body gets a JSON 413 at once', `${huge.data.slice(0, 80)} after ${huge.ms.toFixed(0)} ms`);
    const two = await raw(['GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'],
                          { until: (d) => statuses(d).length >= 2 && d.includes('"list"') });
    check(statuses(two.data).join(',') === '200,200' && two.data.indexOf('"status"') < two.data.indexOf('"list"'),
          'two pipelined requests in one write get two answers, in order', two.data.slice(0, 200));
    const body = JSON.stringify({ model, prompt: 'Expect', max_tokens: 4 });
    const cont = await raw([`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`, 500, body],
                           { until: (d) => d.includes('"choices"'), timeoutMs: 30000 });
    check(statuses(cont.data).join(',') === '100,200', 'Expect: 100-continue gets "100 Continue", then one answer',
          cont.data.slice(0, 200));
    const chunked = await raw([`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
                               `${(10).toString(16)}\r\n${body.slice(0, 10)}\r\n`, 100,
                               `${(body.length - 10).toString(16)}\r\n${body.slice(10)}\r\n0\r\n\r\n`],
                              { until: (d) => d.includes('"choices"'), timeoutMs: 30000 });
    check(statuses(chunked.data)[0] === 200, 'a chunked request body is served', chunked.data.slice(0, 200));
  });
}

async function limits() {
  await step('the whole-request deadline', async () => {
    const r = await raw(['GET /health HTTP/1.1\r\n', 500, 'Host: x\r\n', 500, 'X-A: b\r\n'], { timeoutMs: 8000 });
    check(statuses(r.data)[0] === 408 && r.data.includes('"request_timeout"') && r.ms > 1500 && r.ms < 5000,
          'a request still incomplete after --request-timeout 2 gets a JSON 408, even while bytes trickle in',
          `${r.data.slice(0, 80)} after ${r.ms.toFixed(0)} ms (${r.why})`);
  });
  await step('connections per client address', async () => {
    const held = [];
    for (let i = 0; i < 8; i++) {
      const s = net.connect(port, url.hostname);
      s.on('error', () => {});
      await new Promise((r) => s.on('connect', r));
      held.push(s);
    }
    await sleep(200);
    const ninth = await raw(['GET /health HTTP/1.1\r\nHost: x\r\n\r\n']);
    check(statuses(ninth.data)[0] === 429 && ninth.data.includes('Retry-After: 1') &&
              ninth.data.includes('--max-connections-per-client'),
          'a ninth connection from one address gets 429 with Retry-After', ninth.data.slice(0, 300));
    for (const s of held) s.destroy();
    await sleep(300);
    const after = await request('GET', '/health', undefined, 5000);
    check(after.status === 200, 'once they close, the address is served again', JSON.stringify(after).slice(0, 200));
  });
}

if (mode === 'traffic') await traffic(rest[0], Number(rest[1]));
else if (mode === 'limits') await limits();
else throw new Error(`unknown mode ${mode}`);
finish();
