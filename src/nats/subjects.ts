// NATS subject patterns compared token by token (`*` one token, `>` one or more trailing tokens), to check
// what a stream captures without asking the server: the outcome stream's check and the replication
// resources' both use them.

/** Whether every subject matched by `subject` is also matched by `filter`. */
export function subjectCovers(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    const ft = f[i]!;
    if (ft === '>') return s.length > i;
    if (i >= s.length) return false;
    const st = s[i]!;
    if (st === '>') return false;
    if (ft === '*') continue;
    if (st === '*' || ft !== st) return false;
  }
  return f.length === s.length;
}

/** Whether some subject is matched by both patterns. */
export function subjectsOverlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; ; i++) {
    if (i === x.length || i === y.length) return x.length === y.length;
    const xt = x[i]!;
    const yt = y[i]!;
    // `>` takes one or more tokens: the other side has at least this one.
    if (xt === '>' || yt === '>') return true;
    if (xt !== '*' && yt !== '*' && xt !== yt) return false;
  }
}
