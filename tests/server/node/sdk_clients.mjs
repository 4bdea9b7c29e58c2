// `dgemma serve` driven by two client libraries people use against
// OpenAI-compatible servers, unmodified: the Vercel AI SDK's
// OpenAI-compatible provider (`ai`, `@ai-sdk/openai-compatible`) and
// LangChain's `ChatOpenAI` (`@langchain/openai`). Each must get, plain and
// streamed, the same answer curl got for the same request, with its usage.
//
// usage: node sdk_clients.mjs BASE_URL MODEL CURL_CONTENT
//   CURL_CONTENT: the content curl got for "Hello" with seed 7, max_tokens 5.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText } from 'ai';
import { check, finish, step } from './common.mjs';

const [base, model, curlContent] = process.argv.slice(2);

await step('Vercel AI SDK', async () => {
  const provider = createOpenAICompatible({ name: 'dgemma', baseURL: `${base}/v1`, apiKey: 'unused',
                                            includeUsage: true });
  const settings = { model: provider(model), prompt: 'Hello', maxOutputTokens: 5, seed: 7, maxRetries: 0 };
  const plain = await generateText(settings);
  check(plain.text === curlContent, 'AI SDK generateText gets the answer curl got',
        `${JSON.stringify(plain.text)} vs ${JSON.stringify(curlContent)}`);
  check(plain.usage.outputTokens === 5 && plain.usage.inputTokens > 0 && plain.finishReason === 'length',
        'AI SDK generateText reports usage and finish reason', JSON.stringify([plain.usage, plain.finishReason]));
  const streamed = streamText(settings);
  let text = '';
  for await (const delta of streamed.textStream) text += delta;
  check(text === curlContent, 'AI SDK streamText streams the same answer', JSON.stringify(text));
  const usage = await streamed.usage;
  check(usage.outputTokens === 5, 'AI SDK streamText reports usage (stream_options.include_usage)',
        JSON.stringify(usage));
  const nucleus = await generateText({ ...settings, topP: 0.9, topK: 40, presencePenalty: 0.5, temperature: 0.7 });
  check(nucleus.usage.outputTokens === 5, 'AI SDK topP, topK, presencePenalty and temperature are served',
        JSON.stringify(nucleus.usage));
});

await step('LangChain ChatOpenAI', async () => {
  const llm = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: `${base}/v1` },
                               maxTokens: 5, maxRetries: 0 });
  const plain = await llm.invoke('Hello', { seed: 7 });
  check(plain.content === curlContent, 'LangChain invoke gets the answer curl got',
        `${JSON.stringify(plain.content)} vs ${JSON.stringify(curlContent)}`);
  check(plain.usage_metadata && plain.usage_metadata.output_tokens === 5,
        'LangChain invoke reports token usage', JSON.stringify(plain.usage_metadata));
  let text = '';
  for await (const chunk of await llm.stream('Hello', { seed: 7 })) text += chunk.content;
  check(text === curlContent, 'LangChain stream streams the same answer', JSON.stringify(text));
  const nucleus = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: `${base}/v1` }, maxTokens: 5,
                                   maxRetries: 0, topP: 0.9, frequencyPenalty: 0.5, temperature: 0.7 });
  const sampled = await nucleus.invoke('Hello');
  check(sampled.usage_metadata && sampled.usage_metadata.output_tokens === 5,
        'LangChain topP, frequencyPenalty and temperature are served', JSON.stringify(sampled.usage_metadata));
});

finish();
