// Blade's README "Quick Start" program (echoVic/blade-agent-sdk README.md @3d6fad5c, release 4.2.0,
// MIT License, Copyright (c) echoVic), copied as it is, with two changes:
// - the import line read `from '@blade-ai/agent-sdk'`;
// - the README hard-codes no base URL, so the program would always reach api.openai.com: the
//   provider gets `baseUrl: process.env.OPENAI_BASE_URL` (undefined when unset, i.e. Blade's
//   default), the one literal added, so that a test can point it at a loopback server.
import { createSession } from 'agent-runtime-hooks';

const session = await createSession({
  provider: { type: 'openai', apiKey: process.env.OPENAI_API_KEY!, baseUrl: process.env.OPENAI_BASE_URL },
  model: 'gpt-4o-mini',
  temperature: 0.2,
  maxOutputTokens: 4096,
});

await session.send('Summarize the responsibilities of this project');

for await (const event of session.stream()) {
  if (event.type === 'content') {
    process.stdout.write(event.delta);
  }
}

await session.close();
