// A small game backend on @matchmaker/client: queues players, "provisions" a server for every match.created,
// reactivates the match's tickets when provisioning fails, and handles every other outcome kind. Outcomes come
// from the WebSocket stream as a named consumer, so a restart resumes after the last handled outcome.
//
//   npm start                                  # the service, serving queues/ (eu.ranked)
//   node dist/examples/game-backend/main.js    # this backend (after npm run build:ts)
//
// Settings (environment): MATCHMAKER_GRPC (127.0.0.1:9001), MATCHMAKER_HTTP (http://127.0.0.1:8080),
// QUEUE_ID (eu.ranked), PLAYERS (20), PROVISION_FAIL_EVERY (0: never; N: every N-th provisioning fails),
// RUN_SECS (0: until interrupted), STOP_AFTER_PROVISIONED (0: never; N: stop once N matches are provisioned),
// CONSUMER (game-backend).
import { randomUUID } from 'node:crypto';
import { MatchmakerClient, websocketConsumer } from '@matchmaker/client';
import { GameBackend, type Log, type Player } from './backend.js';
import { Provisioner } from './provisioner.js';

const env = process.env;
const settings = {
  grpc: env.MATCHMAKER_GRPC ?? '127.0.0.1:9001',
  http: env.MATCHMAKER_HTTP ?? 'http://127.0.0.1:8080',
  queueId: env.QUEUE_ID ?? 'eu.ranked',
  players: Number(env.PLAYERS ?? 20),
  failEvery: Number(env.PROVISION_FAIL_EVERY ?? 0),
  runSecs: Number(env.RUN_SECS ?? 0),
  stopAfterProvisioned: Number(env.STOP_AFTER_PROVISIONED ?? 0),
  consumer: env.CONSUMER ?? 'game-backend',
};

const log: Log = (event, fields = {}) => console.log(JSON.stringify({ time: new Date().toISOString(), event, ...fields }));

/** A player near 0.5 mmr with measured latencies to two hosts. */
function player(i: number): Player {
  return {
    playerId: `player-${i}-${randomUUID().slice(0, 8)}`,
    mmr: 0.45 + Math.random() * 0.1,
    latencies: { 'eu-west': 20 + Math.floor(Math.random() * 40), 'eu-central': 30 + Math.floor(Math.random() * 40) },
  };
}

async function main(): Promise<void> {
  const client = new MatchmakerClient({ address: settings.grpc });
  const backend = new GameBackend(client, settings.queueId, new Provisioner(settings.failEvery), log);
  const outcomes = websocketConsumer({
    url: settings.http,
    queueId: settings.queueId,
    consumer: settings.consumer,
    onError: (err) => log('stream_problem', { message: err.message }),
  });
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await outcomes.close();
      client.close();
      log('stopped', backend.counts);
    })());
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
  if (settings.runSecs > 0) setTimeout(() => void stop(), settings.runSecs * 1000).unref();

  try {
    await outcomes.ready();
    log('started', settings);
    // Handled one at a time, each acknowledged once handled; a handler that throws stops the backend, and the
    // stream's position (this consumer's last acknowledgement) makes a restart handle that outcome again.
    const handling = outcomes.run(async (outcome) => {
      await backend.handle(outcome);
      if (settings.stopAfterProvisioned > 0 && backend.counts.provisioned >= settings.stopAfterProvisioned) void stop();
    });
    for (let i = 0; i < settings.players; i++) await backend.queue(player(i));
    await handling;
  } finally {
    await stop();
  }
}

main().catch((err: unknown) => {
  log('failed', { message: err instanceof Error ? err.message : String(err) });
  process.exitCode = 1;
});
