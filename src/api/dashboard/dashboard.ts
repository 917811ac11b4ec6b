// The live dashboard (GET /dashboard): a page served by the service itself, the uPlot library it draws
// with (from node_modules: no build step), and the JSON it polls (GET /admin/v1/activity): every queue's
// state, statistics (GET /admin/v1/queues/{id}/statistics) and recent history (queue-activity.ts), the rule
// diagnostics, the last matches, and the deliveries, parked ones first.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { ServerResponse } from 'node:http';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { GetQueueStatisticsRequestSchema, GetQueueStatisticsResponseSchema } from '../../gen/matchmaker/admin/v1/admin_pb.js';
import type { Operator, QueueSummary } from '../../core/operator.js';
import { sendJson } from '../http-json.js';
import { DASHBOARD_PAGE } from './dashboard-page.js';
import { QueueActivity } from './queue-activity.js';

/** How often each queue's pool size is sampled into its history. */
const POOL_SAMPLE_MS = 2_000;
/** The rule diagnostics sum the candidates refused over this window. */
const RULE_WINDOW_MS = 5 * 60_000;

const require = createRequire(import.meta.url);
const ASSETS: Record<string, { file: string; type: string }> = {
  '/dashboard/uPlot.iife.min.js': { file: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  '/dashboard/uPlot.min.css': { file: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

/** The SHA-256 sources of the page's inline blocks of `tag`, for its CSP. */
function inlineHashes(tag: 'script' | 'style'): string {
  const blocks = [...DASHBOARD_PAGE.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))].map((m) => m[1]!);
  return blocks.map((b) => `'sha256-${createHash('sha256').update(b).digest('base64')}'`).join(' ');
}

/**
 * The page runs only its own scripts and the uPlot file next to it, talks only to this origin, cannot be
 * framed (clickjacking the Release button) and is never sniffed into another type.
 */
const PAGE_HEADERS = {
  'content-security-policy': [
    "default-src 'none'",
    `script-src 'self' ${inlineHashes('script')}`,
    `style-src 'self' ${inlineHashes('style')}`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

export class Dashboard {
  readonly activity = new QueueActivity();
  private readonly sampler: NodeJS.Timeout;
  private readonly assets = new Map<string, Buffer>();

  constructor(private readonly operator: Operator) {
    this.sampler = setInterval(() => this.samplePools(), POOL_SAMPLE_MS);
    this.sampler.unref();
  }

  /** Answers GET /dashboard and its assets; false for any other path. */
  serve(path: string, res: ServerResponse): boolean {
    if (path === '/dashboard' || path === '/dashboard/') {
      for (const [name, value] of Object.entries(PAGE_HEADERS)) res.setHeader(name, value);
      send(res, 'text/html; charset=utf-8', DASHBOARD_PAGE);
      return true;
    }
    const asset = ASSETS[path];
    if (!asset) return false;
    let body = this.assets.get(path);
    if (!body) this.assets.set(path, (body = readFileSync(asset.file)));
    send(res, asset.type, body, 'public, max-age=3600');
    return true;
  }

  /** GET /admin/v1/activity. */
  async sendActivity(res: ServerResponse): Promise<void> {
    const summaries = this.operator.queueSummaries();
    this.recordPools(summaries);
    const queues = await Promise.all(
      summaries.map(async (q) => ({
        ...q,
        ...this.activity.view(q.queueId, RULE_WINDOW_MS),
        statistics: await this.statistics(q.queueId),
      })),
    );
    const deliveries = this.operator.deliveryStatus();
    sendJson(res, 200, { atMs: Date.now(), ruleWindowMs: RULE_WINDOW_MS, queues, deliveries });
  }

  /** The queue's statistics as the admin route answers them; absent when the queue cannot answer now. */
  private async statistics(queueId: string): Promise<JsonValue | undefined> {
    try {
      const answer = await this.operator.queueStatistics(create(GetQueueStatisticsRequestSchema, { queueId }));
      return toJson(GetQueueStatisticsResponseSchema, answer);
    } catch {
      return undefined;
    }
  }

  stop(): void {
    clearInterval(this.sampler);
  }

  private samplePools(): void {
    try {
      this.recordPools(this.operator.queueSummaries());
    } catch {
      // Not serving yet (or any more): nothing to sample.
    }
  }

  /** The pool sizes of the queues this replica leads (the others' history is on their leader). */
  private recordPools(summaries: readonly QueueSummary[]): void {
    for (const q of summaries) if (q.leading) this.activity.samplePool(q.queueId, q.activeTickets);
  }
}

function send(res: ServerResponse, type: string, body: string | Buffer, cache = 'no-store'): void {
  res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': cache });
  res.end(body);
}
