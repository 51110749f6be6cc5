// Drive poppy-mcp with the TypeScript SDK client (npm @modelcontextprotocol/client, installed with
// the MCP Inspector by scripts/install-test-deps.sh), pinned to each MCP revision in turn, over
// stdio and streamable HTTP: tools/list, discover_company and start_session must answer without
// error, and the negotiated revision must be the one pinned.
// Usage: POPPY_HTTP_TOKEN=TOKEN node scripts/ts-client-check.mjs POPPY_MCP_BINARY [HTTP_MCP_URL]
// (the HTTP server's bearer token comes by environment: a command line shows in `ps`).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const req = createRequire(path.join(root, 'testdata-external/inspector/package.json'));
const sdk = await import(pathToFileURL(req.resolve('@modelcontextprotocol/client')));
const stdio = await import(pathToFileURL(req.resolve('@modelcontextprotocol/client/stdio')));
const [bin, httpURL] = process.argv.slice(2);
const revisions = ['2025-11-25', '2026-07-28'];
const domain = 'demo.poppy.example';

function negotiation(rev) {
  return rev === '2025-11-25' ? { mode: 'legacy' } : { mode: { pin: rev } };
}

async function check(label, rev, transport) {
  const client = new sdk.Client({ name: 'ts-client-check', version: '1' }, { versionNegotiation: negotiation(rev) });
  await client.connect(transport);
  try {
    const got = client.getNegotiatedProtocolVersion();
    if (got !== rev) throw new Error(`negotiated ${got}, want ${rev}`);
    const list = await client.listTools();
    if (!list.tools.some(t => t.name === 'discover_company')) throw new Error('discover_company missing from tools/list');
    const disc = await client.callTool({ name: 'discover_company', arguments: { domain } });
    if (disc.isError || disc.structuredContent?.usable !== true) throw new Error('discover_company: ' + JSON.stringify(disc).slice(0, 300));
    const sess = await client.callTool({ name: 'start_session', arguments: { domain } });
    if (sess.isError || !/^ses_/.test(sess.structuredContent?.session_id ?? '')) throw new Error('start_session: ' + JSON.stringify(sess).slice(0, 300));
    console.log(`ts-client-check: ok: ${label} ${rev} (${list.tools.length} tools)`);
  } finally {
    await client.close();
  }
}

let failed = false;
for (const rev of revisions) {
  try {
    await check('stdio', rev, new stdio.StdioClientTransport({ command: bin, args: ['serve', '--demo'], stderr: 'ignore' }));
    const headers = { Authorization: `Bearer ${process.env.POPPY_HTTP_TOKEN ?? ''}` };
    if (httpURL) await check('http', rev, new sdk.StreamableHTTPClientTransport(new URL(httpURL), { requestInit: { headers } }));
  } catch (e) {
    failed = true;
    console.error(`ts-client-check: FAIL at ${rev}: ${e?.stack ?? e}`);
  }
}
process.exit(failed ? 1 : 0);
