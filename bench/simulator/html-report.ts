// Renders the charts to SVG in Node (Vega-Lite compiles each spec to Vega, a headless Vega view draws it)
// and writes them, each as its own .svg file and all inlined into one index.html that needs nothing else:
// no script, no stylesheet or font to fetch, so it opens offline.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parse, View } from 'vega';
import { compile } from 'vega-lite';
import { CHART_NAMES, type Chart } from './charts.js';

export async function renderSvg(chart: Chart): Promise<string> {
  const view = new View(parse(compile(chart.spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

export interface ReportSection {
  heading: string;
  /** Preformatted text (the tables the command line prints). */
  text?: string;
  charts?: readonly Chart[];
}

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const STYLE = `
body { font-family: sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2.5rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1rem; margin-bottom: 0.2rem; }
pre { background: #f6f6f6; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; line-height: 1.3; }
figure { margin: 1rem 0 2rem; } figcaption { color: #555; font-size: 0.9rem; max-width: 50rem; margin-bottom: 0.5rem; }
figure svg { max-width: 100%; height: auto; }
`;

/**
 * Writes DIR/NAME.svg per chart and DIR/index.html; removes chart files of earlier runs that this run did
 * not draw (e.g. sweep.svg after a run without --sweep). Returns the absolute path of index.html.
 */
export async function writeReport(dir: string, title: string, sections: readonly ReportSection[]): Promise<string> {
  await mkdir(dir, { recursive: true });
  const drawn = new Set<string>();
  const body: string[] = [`<h1>${escapeHtml(title)}</h1>`];
  for (const section of sections) {
    body.push(`<h2>${escapeHtml(section.heading)}</h2>`);
    if (section.text !== undefined) body.push(`<pre>${escapeHtml(section.text)}</pre>`);
    for (const chart of section.charts ?? []) {
      const svg = await renderSvg(chart);
      await writeFile(join(dir, `${chart.name}.svg`), svg);
      drawn.add(chart.name);
      body.push(
        `<figure id="${escapeHtml(chart.name)}"><h3>${escapeHtml(chart.title)}</h3>`,
        `<figcaption>${escapeHtml(chart.caption)} (<code>${escapeHtml(chart.name)}.svg</code>)</figcaption>`,
        svg,
        '</figure>',
      );
    }
  }
  for (const name of CHART_NAMES) if (!drawn.has(name)) await rm(join(dir, `${name}.svg`), { force: true });
  const html = [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    ...body,
    '</body>',
    '</html>',
    '',
  ].join('\n');
  const index = resolve(dir, 'index.html');
  await writeFile(index, html);
  return index;
}
