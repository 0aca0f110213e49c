// Drives the AG-UI route with the reference TypeScript client (@ag-ui/client's HttpAgent),
// as a browser front end would. Usage:
//   node ag_ui_client.mjs PEERS_DIR URL TOKEN SCENARIO THREAD_ID
// SCENARIO: "tool" (one run), "approval" (a run that waits, then a run that answers
// allow_once), "cancel" (abortRun once the tool's first progress arrives, then one more run).
// Prints one JSON object on stdout: {runs: [{events, error}], messages}.
import { createRequire } from "node:module";

const [peers, url, token, scenario, threadId] = process.argv.slice(2);
const require = createRequire(`${peers}/package.json`);
const { HttpAgent } = require("@ag-ui/client");

const agent = new HttpAgent({
  url,
  threadId,
  headers: { Authorization: `Bearer ${token}` },
});

async function run(text, forwardedProps, onEvent) {
  const events = [];
  if (text !== null) {
    agent.addMessage({ id: `user-${Date.now()}-${Math.random()}`, role: "user", content: text });
  }
  let error = null;
  try {
    await agent.runAgent(
      { forwardedProps: forwardedProps ?? {} },
      {
        onEvent: ({ event }) => {
          events.push(event);
          if (onEvent) onEvent(event);
        },
      },
    );
  } catch (failure) {
    error = String(failure);
  }
  return { events, error };
}

const runs = [];
if (scenario === "tool") {
  runs.push(await run("build the app"));
} else if (scenario === "approval") {
  const first = await run("delete a.txt");
  runs.push(first);
  const request = first.events.find(
    (e) => e.type === "CUSTOM" && e.name === "sagents.approval.request",
  );
  if (request) {
    const decisions = { [request.value.id]: { decision: "allow_once" } };
    runs.push(await run(null, { sagents: { decisions } }));
  }
} else if (scenario === "cancel") {
  runs.push(
    await run("wait", {}, (event) => {
      if (event.type === "CUSTOM" && event.name === "tool_progress" && event.value.text) {
        agent.abortRun();
      }
    }),
  );
  runs.push(await run("and now?"));
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }) + "\n");
