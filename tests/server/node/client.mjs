// Functional tests of `dgemma serve` with the official openai client,
// unmodified: models, chat (plain and streamed), completions, stop strings,
// drafts, concurrent streams, cancellation, tool calling, errors.
//
// usage: node client.mjs BASE_URL MODEL CURL_CONTENT IMAGE_DIR
//   CURL_CONTENT: the content curl got for the chat request below (seed 7,
//   max_tokens 5), which the client must reproduce exactly. IMAGE_DIR: the
//   pictures the image requests send (tests/data/golden_v/images).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { bad, check, finish, metric, ok, step, waitFor } from './common.mjs';

const [base, model, curlContent, imageDir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const hello = [{ role: 'user', content: 'Hello' }];

async function chat(seed, maxTokens, extra = {}) {
  return client.chat.completions.create({ model, messages: hello, max_tokens: maxTokens, seed, ...extra });
}

// Streams a chat request; returns {content, finish, usage, chunks, drafts}.
async function streamChat(seed, maxTokens, extra = {}, signal = undefined) {
  const stream = await client.chat.completions.create(
    { model, messages: hello, max_tokens: maxTokens, seed, stream: true, ...extra },
    signal ? { signal } : {},
  );
  const r = { content: '', finish: null, usage: null, chunks: 0, drafts: [] };
  for await (const chunk of stream) {
    r.chunks++;
    if (chunk.usage) r.usage = chunk.usage;
    if (chunk.dgemma_draft) r.drafts.push(chunk.dgemma_draft);
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta && choice.delta.content) r.content += choice.delta.content;
    if (choice.finish_reason) r.finish = choice.finish_reason;
  }
  return r;
}

await step('models', async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  check(ids.includes(model), 'models.list names the served model', JSON.stringify(ids));
  const m = await client.models.retrieve(model);
  check(m.id === model && m.object === 'model', 'models.retrieve');
});

let reference = '';
await step('chat', async () => {
  const r = await chat(7, 5);
  reference = r.choices[0].message.content;
  check(reference.length > 0, 'chat: non-empty content');
  check(r.choices[0].finish_reason === 'length', 'chat: finish_reason length', r.choices[0].finish_reason);
  check(r.usage.completion_tokens === 5 && r.usage.total_tokens === r.usage.prompt_tokens + 5,
    'chat: usage counts max_tokens exactly', JSON.stringify(r.usage));
  check(r.object === 'chat.completion' && r.choices[0].message.role === 'assistant', 'chat: object and role');
  check(reference === curlContent, 'chat: same answer as curl for the same seed', `${JSON.stringify(reference)} vs ${JSON.stringify(curlContent)}`);
  const again = await chat(7, 5);
  check(again.choices[0].message.content === reference, 'chat: deterministic for a fixed seed');
});

await step('stream', async () => {
  const s = await streamChat(7, 5, { stream_options: { include_usage: true } });
  check(s.content === reference, 'stream: same text as the non-streamed answer', `${JSON.stringify(s.content)}`);
  check(s.finish === 'length', 'stream: finish_reason length', String(s.finish));
  check(s.usage && s.usage.completion_tokens === 5, 'stream: usage in the final chunk', JSON.stringify(s.usage));
});

await step('n choices, streamed', async () => {
  // Seed 6 with n = 2: choice 1 uses seed 7, whose answer curl got.
  const stream = await client.chat.completions.create({ model, messages: hello, max_tokens: 5, seed: 6, n: 2,
                                                        stream: true });
  const content = ['', ''], finish = [null, null];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) content[c.index] += c.delta.content;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  check(content[1] === curlContent, 'stream n=2: choice 1 streams seed 7\'s answer', JSON.stringify(content));
  check(finish[0] === 'length' && finish[1] === 'length', 'stream n=2: each choice finishes', JSON.stringify(finish));
});

await step('logprobs, streamed', async () => {
  const stream = await client.chat.completions.create({ model, messages: hello, max_tokens: 5, seed: 7, stream: true,
                                                        logprobs: true, top_logprobs: 1 });
  let content = '';
  const tokens = [];
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta && c.delta.content) content += c.delta.content;
    if (c.logprobs && c.logprobs.content) tokens.push(...c.logprobs.content);
  }
  check(content === curlContent && tokens.length === 5, 'stream logprobs: one entry per answer token, same answer',
        `${tokens.length} entries for ${JSON.stringify(content)}`);
  check(tokens.every((t) => t.logprob < 0 && t.top_logprobs.length === 1 && t.top_logprobs[0].token === t.token),
        'stream logprobs: each token heads its alternatives', JSON.stringify(tokens[0]));
});

await step('max_tokens across canvases', async () => {
  for (const n of [1, 17, 40]) {
    const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: n, seed: 3 });
    check(r.usage.completion_tokens === n && r.choices[0].finish_reason === 'length' && r.choices[0].text.length > 0,
      `completions: max_tokens ${n} honoured exactly`, JSON.stringify(r.usage));
  }
});

await step('stop strings', async () => {
  const long = (await chat(11, 32)).choices[0].message.content;
  // A stop string taken from the second half of the text: the answer is the
  // text before its first occurrence, finish_reason "stop".
  const at = Math.floor(long.length * 0.6);
  let stop = long.slice(at, at + 3);
  if (stop.trim().length === 0) stop = long.slice(at - 3, at);
  const expected = long.slice(0, long.indexOf(stop));
  const r = await chat(11, 32, { stop: [stop, '\u0000never'] });
  check(r.choices[0].message.content === expected && r.choices[0].finish_reason === 'stop',
    'stop string cuts the text and gives finish_reason stop',
    `${JSON.stringify(r.choices[0].message.content)} vs ${JSON.stringify(expected)} (${r.choices[0].finish_reason})`);
  check(r.usage.completion_tokens < 32, 'stop string: fewer completion tokens', JSON.stringify(r.usage));
  const s = await streamChat(11, 32, { stop });
  check(s.content === expected && s.finish === 'stop', 'stop string in a stream', JSON.stringify(s.content));
});

await step('drafts', async () => {
  const s = await streamChat(7, 5, { stream_options: { include_drafts: true } });
  check(s.drafts.length >= 2, 'drafts: one chunk per denoising step', String(s.drafts.length));
  const last = s.drafts[s.drafts.length - 1] || {};
  check(last.text === reference && s.content === reference, 'drafts: the last draft is the committed text',
    JSON.stringify(last));
  check(typeof last.mask === 'string' && last.mask.length === last.canvas_length, 'drafts: mask per position');
});

await step('concurrent streams', async () => {
  const seeds = [21, 22, 23, 24, 25, 26];
  // Sequential non-streamed answers first, then all streams at once: the
  // interleaved sequences (own KV caches, shared model) must give the same text.
  const expected = [];
  for (const seed of seeds) expected.push((await chat(seed, 20)).choices[0].message.content);
  const results = await Promise.all(seeds.map((seed) => streamChat(seed, 20)));
  const same = results.every((r, i) => r.content === expected[i] && r.finish === 'length');
  check(same, `${seeds.length} concurrent streams complete with the same text as sequential runs`,
    JSON.stringify(results.map((r) => r.content)));
});

await step('cancellation', async () => {
  const cancelledBefore = await metric(base, 'dgemma_generations_total{outcome="cancelled"}');
  const controller = new AbortController();
  let gotText = false;
  try {
    const stream = await client.chat.completions.create(
      { model, messages: hello, max_tokens: 100000, seed: 5, stream: true },
      { signal: controller.signal },
    );
    for await (const chunk of stream) {
      if (chunk.choices[0] && chunk.choices[0].delta.content) {
        gotText = true;
        controller.abort();
      }
    }
  } catch (e) {
    if (!gotText) throw e;
  }
  check(gotText, 'cancellation: text arrived before the abort');
  const freed = await waitFor(async () => (await metric(base, 'dgemma_sequences_in_flight')) === 0 &&
    (await metric(base, 'dgemma_generations_total{outcome="cancelled"}')) === cancelledBefore + 1, 20000);
  check(freed, 'cancellation: the slot is freed and counted as cancelled (/metrics)');
});

await step('tools', async () => {
  // The tiny model answers noise, so the answer is checked for its shape: text
  // with finish_reason stop/length, or well-formed calls with "tool_calls".
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Current weather',
      parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
    },
  }];
  const wellFormed = (message, finish) => (finish === 'tool_calls'
    ? message.tool_calls.length > 0 && message.tool_calls.every((t) => t.type === 'function' &&
      t.function.name === 'get_weather' && typeof JSON.parse(t.function.arguments) === 'object')
    : ['stop', 'length'].includes(finish) && typeof message.content === 'string' && !message.tool_calls);
  const history = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '18C, sunny' },
  ];
  const r = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 8, seed: 2 });
  check(wellFormed(r.choices[0].message, r.choices[0].finish_reason),
    'tools: a call, its result and tools are accepted; the answer is well formed', JSON.stringify(r.choices[0]));
  // The SDK's stream helper rebuilds the message from the chunks (delta.tool_calls included).
  const stream = client.chat.completions.stream({
    model, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools, tool_choice: 'required', max_tokens: 8,
  });
  const final = await stream.finalChatCompletion();
  check(wellFormed(final.choices[0].message, final.choices[0].finish_reason),
    'tools: a stream with tool_choice required ends in a well-formed message', JSON.stringify(final.choices[0]));
  try {
    await client.chat.completions.create({ model, messages: hello, tools, tool_choice: { type: 'function', function: { name: 'nope' } } });
    bad('tools: an undeclared tool_choice function was accepted');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === 'tool_choice.function.name',
      'tools: an undeclared tool_choice function is a 400 naming the field', `${e.status} ${e.message}`);
  }
});

// Pictures as data: URLs (docs/server.md §8); the default model has a small vision tower.
const picture = (file, type) =>
  `data:${type};base64,${readFileSync(join(imageDir, file)).toString('base64')}`;
const imageMessage = (url, text = 'What is in the picture?') =>
  [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text }] }];

await step('images', async () => {
  const m = await client.models.retrieve(model);
  check(Array.isArray(m.input_modalities) && m.input_modalities.includes('image'), 'models.retrieve: takes images',
    JSON.stringify(m.input_modalities));
  const png = picture('png_up.png', 'image/png');
  const r = await client.chat.completions.create({ model, messages: imageMessage(png), max_tokens: 5, seed: 3 });
  check(r.choices[0].message.content.length > 0 && r.usage.completion_tokens === 5, 'image: answered',
    JSON.stringify(r.usage));
  const text = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'What is in the picture?' }], max_tokens: 5, seed: 3 });
  check(r.usage.prompt_tokens > text.usage.prompt_tokens + 2, 'image: the soft tokens count as prompt tokens',
    `${r.usage.prompt_tokens} vs ${text.usage.prompt_tokens}`);
  const again = await client.chat.completions.create({ model, messages: imageMessage(png), max_tokens: 5, seed: 3 });
  check(again.choices[0].message.content === r.choices[0].message.content, 'image: deterministic for a fixed seed');
  const jpeg = await client.chat.completions.create({
    model, max_tokens: 5, seed: 3,
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: picture('wide.jpg', 'image/jpeg') } },
      { type: 'image_url', image_url: { url: picture('jpeg_exif.jpg', 'image/jpeg') } }, { type: 'text', text: 'Compare.' }] }],
  });
  check(jpeg.usage.completion_tokens === 5, 'two JPEG images in one message');
  // A broken picture is a 400 naming it, and a good request beside it is unaffected.
  const truncated = `data:image/png;base64,${readFileSync(join(imageDir, 'png_up.png')).subarray(0, 200).toString('base64')}`;
  const [bad1, good] = await Promise.allSettled([
    client.chat.completions.create({ model, messages: imageMessage(truncated), max_tokens: 5 }),
    client.chat.completions.create({ model, messages: imageMessage(png), max_tokens: 5, seed: 3 }),
  ]);
  check(bad1.status === 'rejected' && bad1.reason instanceof OpenAI.BadRequestError &&
    bad1.reason.param === 'messages[0].content[0].image_url', 'truncated image: 400 naming the part',
    bad1.status === 'rejected' ? `${bad1.reason.status} ${bad1.reason.param} ${bad1.reason.message}` : 'accepted');
  check(good.status === 'fulfilled' && good.value.choices[0].message.content === r.choices[0].message.content,
    'a good image request beside a bad one is unaffected');
  try {
    await client.chat.completions.create({ model, messages: imageMessage('data:image/png;base64,bm90IGFuIGltYWdl'), max_tokens: 5 });
    bad('not an image: accepted');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && /image 0/.test(e.message), 'not an image: 400 naming image 0', e.message);
  }
});

await step('errors', async () => {
  const expectStatus = async (name, status, fn) => {
    try {
      await fn();
      bad(`${name}: no error`);
    } catch (e) {
      check(e instanceof OpenAI.APIError && e.status === status && e.error && typeof e.error.message === 'string',
        `${name}: ${status} with an error object`, `${e.status} ${e.message}`);
    }
  };
  await expectStatus('unknown model', 404, () => client.chat.completions.create({ model: 'nope', messages: hello }));
  await expectStatus('negative max_tokens', 400, () => chat(1, -1));
  await expectStatus('n = 17 (over the limit of 16)', 400, () => chat(1, 5, { n: 17 }));
  await expectStatus('empty messages', 400, () => client.chat.completions.create({ model, messages: [] }));
  await expectStatus('bad temperature', 400, () => chat(1, 5, { temperature: 3 }));
  await expectStatus('remote image URL', 400, () => client.chat.completions.create({
    model, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }],
  }));
  const r = await chat(7, 5);
  check(r.choices[0].message.content === reference, 'after errors the server still answers correctly');
});

finish();
