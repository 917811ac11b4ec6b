// What queues report (src/queue/queue-telemetry.ts) as Prometheus counters and histograms, labelled by
// queue and, where a match or a rule is concerned, by ruleset.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { QueueTelemetry } from '../../queue/queue-telemetry.js';

/** Waits from a quick fill to the default ticket_ttl_secs (600). */
const WAIT_BUCKETS_SECONDS = [0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600];
/** In the units of max_skill_spread (÷ mmr_normalization_ref): the defaults relax it from 2 to 5. */
const SPREAD_BUCKETS = [0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10];
/** In the units of max_team_imbalance (default 1). */
const IMBALANCE_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3];
const TICK_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function queueMetrics(registers: Registry[]): QueueTelemetry {
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter<L>({ name, help, labelNames, registers });
  const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]) =>
    new Histogram<L>({ name, help, labelNames, buckets, registers });
  const byQueue = ['queue_id'] as const;
  const byRuleset = ['queue_id', 'ruleset_id'] as const;

  const created = counter(
    'matchmaker_tickets_created_total',
    'Tickets that entered the pool (a repeated CreateTicket is not counted).',
    byQueue,
  );
  const left = counter(
    'matchmaker_tickets_left_total',
    'Tickets that left the pool without a match, by exit: cancelled, expired, orphaned, or the removal reason.',
    ['queue_id', 'exit'],
  );
  const matches = counter('matchmaker_matches_total', 'Matches formed and committed.', byRuleset);
  const players = counter('matchmaker_players_matched_total', 'Players in formed matches.', byRuleset);
  const wait = histogram(
    'matchmaker_ticket_wait_seconds',
    'Per matched ticket, time from its creation to its match.',
    byRuleset,
    WAIT_BUCKETS_SECONDS,
  );
  const spread = histogram(
    'matchmaker_match_skill_spread',
    'Skill spread of formed matches, in the units of max_skill_spread (÷ mmr_normalization_ref).',
    byRuleset,
    SPREAD_BUCKETS,
  );
  const imbalance = histogram(
    'matchmaker_match_team_imbalance',
    'Team imbalance of formed matches, in the units of max_team_imbalance.',
    byRuleset,
    IMBALANCE_BUCKETS,
  );
  const backfills = counter('matchmaker_backfills_filled_total', 'Backfill requests filled.', byRuleset);
  const backfillPlayers = counter('matchmaker_backfill_players_total', 'Players placed into running matches by backfill.', byRuleset);
  const ticks = histogram(
    'matchmaker_tick_duration_seconds',
    'A tick, from its start to its last committed match.',
    byQueue,
    TICK_BUCKETS_SECONDS,
  );
  const engine = histogram(
    'matchmaker_engine_duration_seconds',
    "The engine's run over the pool within a tick.",
    byQueue,
    TICK_BUCKETS_SECONDS,
  );
  const examined = counter('matchmaker_engine_tickets_examined_total', 'Tickets the engine searched, summed over ticks.', byQueue);
  const rejections = counter(
    'matchmaker_rule_rejections_total',
    'Candidate matches a rule refused, counted by the engine (docs/metrics.md, Rule diagnostics).',
    ['queue_id', 'ruleset_id', 'rule'],
  );

  return {
    ticketsCreated: (queueId, count) => created.inc({ queue_id: queueId }, count),
    ticketsLeft: (queueId, exit, count) => left.inc({ queue_id: queueId, exit }, count),
    backfillFilled(queueId, rulesetId, count) {
      const labels = { queue_id: queueId, ruleset_id: rulesetId };
      backfills.inc(labels);
      backfillPlayers.inc(labels, count);
    },
    matchFormed(m) {
      const labels = { queue_id: m.queueId, ruleset_id: m.rulesetId };
      matches.inc(labels);
      players.inc(labels, m.players);
      const waits = wait.labels(labels);
      for (const ms of m.waitsMs) waits.observe(ms / 1000);
      spread.observe(labels, m.skillSpread);
      imbalance.observe(labels, m.teamImbalance);
    },
    tick(t) {
      const labels = { queue_id: t.queueId };
      ticks.observe(labels, t.tickMs / 1000);
      engine.observe(labels, t.engineMs / 1000);
      examined.inc(labels, t.ticketsExamined);
      for (const r of t.rejections)
        if (r.count > 0) rejections.inc({ queue_id: t.queueId, ruleset_id: r.rulesetId, rule: r.rule }, r.count);
    },
  };
}
