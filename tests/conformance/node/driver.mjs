// Drives the official rocketmq-client-nodejs (npm, 1.0.8) for Ariane's conformance tests.
// Usage: node driver.mjs ENDPOINTS TOPIC GROUP COUNT [--access-key AK --secret-key SK] [--tls]
// Sends COUNT messages with tag "node", then receives and acks them with a SimpleConsumer,
// printing one JSON line per event. With --access-key both clients sign as that user
// (`sessionCredentials`, ACL 2.0). --tls sets `sslEnabled: true`: grpc-js verifies the server
// (chain and host) against its default roots, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH when set. Exits 0 when every sent message was received and acked,
// 3 when the bounded loop gave up first, 2 on a client error: its `error` event names the
// client's exception (`type`, e.g. UnauthorizedException) and its response `code`.
import { Producer, SimpleConsumer } from 'rocketmq-client-nodejs';

const [endpoints, topic, group, countText, ...flags] = process.argv.slice(2);
const count = Number(countText);
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n');
const flag = (name) => {
  const at = flags.indexOf(`--${name}`);
  return at >= 0 ? flags[at + 1] : undefined;
};
const accessKey = flag('access-key');
const sessionCredentials = accessKey === undefined
  ? undefined : { accessKey, accessSecret: flag('secret-key') ?? '' };
const sslEnabled = flags.includes('--tls');

async function roundTrip() {
  const producer = new Producer({ endpoints, sessionCredentials, sslEnabled, requestTimeout: 10000 });
  await producer.startup();
  const sent = new Set();
  for (let i = 0; i < count; i++) {
    const receipt = await producer.send({
      topic, tag: 'node', keys: [`node-key-${i}`], body: Buffer.from(`node-${i}`),
    });
    sent.add(receipt.messageId);
    emit({ event: 'sent', i, message_id: receipt.messageId });
  }
  await producer.shutdown();

  const consumer = new SimpleConsumer({
    endpoints, sessionCredentials, sslEnabled, consumerGroup: group, subscriptions: new Map().set(topic, '*'),
    requestTimeout: 10000, awaitDuration: 5000,
  });
  await consumer.startup();
  const acked = new Set();
  const deadline = Date.now() + 60000;
  while (acked.size < count && Date.now() < deadline) {
    const messages = await consumer.receive(16, 15000);
    for (const message of messages) {
      emit({ event: 'received', message_id: message.messageId, body: message.body.toString(),
        tag: message.tag, keys: message.keys, attempt: message.deliveryAttempt });
      await consumer.ack(message);
      acked.add(message.messageId);
      emit({ event: 'acked', message_id: message.messageId });
    }
  }
  await consumer.shutdown();
  const missing = [...sent].filter((id) => !acked.has(id));
  emit({ event: 'done', sent: sent.size, acked: acked.size, missing });
  return missing.length === 0 ? 0 : 3;
}

let code;
try {
  code = await roundTrip();
} catch (error) {
  console.error(error);
  // A failed startup wraps the client's exception in `cause`: report the one with a code.
  let cause = error;
  while (cause.code === undefined && cause.cause instanceof Error) cause = cause.cause;
  emit({ event: 'error', type: cause.name, code: cause.code, message: String(error.message) });
  code = 2;
}
// A client that failed mid-startup may hold timers: end with the outcome's code.
process.exit(code);
