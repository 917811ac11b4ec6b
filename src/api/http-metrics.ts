// GET /metrics: the Prometheus exposition of the service's metrics (metrics/service-metrics.ts).
import type { ServerResponse } from 'node:http';
import type { ServiceMetrics } from './metrics/service-metrics.js';

export async function metrics(res: ServerResponse, serviceMetrics: ServiceMetrics): Promise<void> {
  const body = await serviceMetrics.text();
  res.writeHead(200, { 'content-type': serviceMetrics.contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
