// The compose test's webhook receiver, on its network as `receiver` (run by node in the tourops
// image): HTTPS on 8443 with the test CA's certificate, each request's body a line of
// /out/received.jsonl, answered 204.
import { appendFileSync, readFileSync } from 'node:fs';
import { createServer } from 'node:https';

const server = createServer(
  { key: readFileSync('/run/receiver/key.pem'), cert: readFileSync('/run/receiver/cert.pem') },
  (request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      appendFileSync('/out/received.jsonl', `${Buffer.concat(chunks).toString('utf8')}\n`);
      response.writeHead(204).end();
    });
  },
);
server.listen(8443, () => console.log('receiver listening'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
