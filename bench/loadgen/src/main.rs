//! `loadgen`: a lean native gRPC CreateTicket load generator for `npm run bench`.
//!
//! Why it exists: the Node generator (bench/create-ticket-load.ts) costs ~130-200 µs of CPU per request
//! and its event loop stalls for tens of ms, on the same 2 cores as the server, so its percentiles have a
//! floor of ~22 ms p99 even against a server that does nothing. This one speaks raw gRPC over h2 on one
//! thread (a current_thread tokio runtime: one core for the client, the other for the server), with the
//! requests pre-encoded by Node (bench/native-load.ts writes them), so what it measures is the server.
//!
//! It has the same modes and reports the same fields as create-ticket-load.ts's `LoadResult`:
//!   closed: `--concurrency` requests always in flight; latency from the actual send.
//!   fixed:  open loop, request k due at start + k / rate; latency from the *scheduled* time (no
//!           coordinated omission); at most `--max-in-flight` outstanding, the rest wait in a backlog.
//! Requests whose (scheduled) start falls in the warm-up are sent but not counted. It prints
//! `measure-start` / `measure-end` on stderr when the measured window opens / closes, and one JSON object
//! on stdout at the end.
//!
//! Limits: sends wait on tokio's 1 ms timer, so fixed-mode latencies (from the schedule) include up to
//! ~2 ms of client send lag (see maxScheduleLagMs and clientLoopDelayMs). A connection that breaks is not
//! reopened: its calls fail fast as UNAVAILABLE (in closed mode a worker then pauses 1 ms, not to spin).
//!
//! Requests file (`--requests`): u32 LE count, then per template: u32 LE length, u32 LE offset of a
//! 36-byte UUID placeholder, the bytes (a serialized CreateTicketRequest). Each request takes the next
//! template, gets a fresh random v4 UUID at the offset, and must be answered with that id.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use tokio::net::TcpStream;
use tokio::task::spawn_local;
use tokio::time::{sleep, sleep_until, timeout};

const PATH: &str = "/matchmaker.core.v1.MatchmakerService/CreateTicket";
const UUID_LEN: usize = 36;
const TICK: Duration = Duration::from_millis(10);

const USAGE: &str = "usage: loadgen --requests FILE [--target HOST:PORT] [--mode closed|fixed] [--concurrency N]
               [--connections N] [--rate R] [--max-in-flight N] [--warmup-secs S] [--duration-secs S]
               [--deadline-ms MS] [--drain-timeout-ms MS]
defaults: --target 127.0.0.1:9001 --mode closed --concurrency 64 --connections 4 --rate 3000
          --max-in-flight 512 --warmup-secs 2 --duration-secs 10 --deadline-ms 10000
          --drain-timeout-ms (the deadline)";

// ---------------------------------------------------------------------------------------------------------
// Settings

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Closed,
    Fixed,
}

#[derive(Debug)]
struct Config {
    target: String,
    mode: Mode,
    concurrency: usize,
    connections: usize,
    rate: f64,
    max_in_flight: usize,
    warmup_secs: f64,
    duration_secs: f64,
    deadline_ms: u64,
    drain_timeout_ms: u64,
    requests: String,
}

fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut c = Config {
        target: "127.0.0.1:9001".into(),
        mode: Mode::Closed,
        concurrency: 64,
        connections: 4,
        rate: 3000.0,
        max_in_flight: 512,
        warmup_secs: 2.0,
        duration_secs: 10.0,
        deadline_ms: 10_000,
        drain_timeout_ms: 0,
        requests: String::new(),
    };
    let mut drain = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = || match v.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
            _ => Err(format!("{flag} must be a non-negative number, got \"{v}\"")),
        };
        match flag.as_str() {
            "--target" => c.target = v.clone(),
            "--requests" => c.requests = v.clone(),
            "--mode" => {
                c.mode = match v.as_str() {
                    "closed" => Mode::Closed,
                    "fixed" => Mode::Fixed,
                    _ => return Err(format!("--mode must be closed or fixed, got \"{v}\"")),
                }
            }
            "--concurrency" => c.concurrency = num()? as usize,
            "--connections" => c.connections = num()? as usize,
            "--rate" => c.rate = num()?,
            "--max-in-flight" => c.max_in_flight = num()? as usize,
            "--warmup-secs" => c.warmup_secs = num()?,
            "--duration-secs" => c.duration_secs = num()?,
            "--deadline-ms" => c.deadline_ms = num()? as u64,
            "--drain-timeout-ms" => drain = Some(num()? as u64),
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    c.drain_timeout_ms = drain.unwrap_or(c.deadline_ms);
    if c.requests.is_empty() {
        return Err(format!("--requests is required\n{USAGE}"));
    }
    if c.connections < 1 {
        return Err("--connections must be >= 1".into());
    }
    if c.mode == Mode::Closed && c.concurrency < 1 {
        return Err("--concurrency must be >= 1".into());
    }
    if c.mode == Mode::Fixed && !(c.rate > 0.0 && c.max_in_flight >= 1) {
        return Err("--rate must be > 0 and --max-in-flight >= 1".into());
    }
    if c.duration_secs <= 0.0 || c.deadline_ms == 0 {
        return Err("--duration-secs and --deadline-ms must be > 0".into());
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------------------------------
// Requests

struct Template {
    bytes: Vec<u8>,
    id_offset: usize,
}

fn parse_templates(data: &[u8]) -> Result<Vec<Template>, String> {
    let mut pos = 0usize;
    let u32_le = |pos: &mut usize| -> Result<usize, String> {
        let b = data.get(*pos..*pos + 4).ok_or("requests file is truncated")?;
        *pos += 4;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let count = u32_le(&mut pos)?;
    let mut templates = Vec::with_capacity(count);
    for i in 0..count {
        let len = u32_le(&mut pos)?;
        let id_offset = u32_le(&mut pos)?;
        let bytes = data.get(pos..pos + len).ok_or("requests file is truncated")?.to_vec();
        pos += len;
        if id_offset + UUID_LEN > len {
            return Err(format!("template {i}: id offset {id_offset} + 36 is past its length {len}"));
        }
        templates.push(Template { bytes, id_offset });
    }
    if templates.is_empty() || pos != data.len() {
        return Err("requests file: no templates, or trailing bytes".into());
    }
    Ok(templates)
}

/// SplitMix64: small, fast, plenty for ticket ids in a benchmark.
struct Rng(u64);

impl Rng {
    fn from_time() -> Rng {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        Rng(nanos ^ ((std::process::id() as u64) << 32))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A random lowercase v4 UUID: xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx.
fn uuid_v4(rng: &mut Rng) -> [u8; UUID_LEN] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    b[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; UUID_LEN];
    let mut o = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out[o] = b'-';
            o += 1;
        }
        out[o] = HEX[(byte >> 4) as usize];
        out[o + 1] = HEX[(byte & 15) as usize];
        o += 2;
    }
    out
}

/// The gRPC message for one request (flag 0, u32 BE length, the template with `id` written in).
fn frame_request(t: &Template, id: &[u8; UUID_LEN]) -> Bytes {
    let mut buf = BytesMut::with_capacity(5 + t.bytes.len());
    buf.put_u8(0);
    buf.put_u32(t.bytes.len() as u32);
    buf.extend_from_slice(&t.bytes);
    let at = 5 + t.id_offset;
    buf[at..at + UUID_LEN].copy_from_slice(id);
    buf.freeze()
}

// ---------------------------------------------------------------------------------------------------------
// Responses

const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

fn code_name(code: u32) -> String {
    CODE_NAMES.get(code as usize).map_or_else(|| format!("CODE_{code}"), |n| n.to_string())
}

/// A failed call: the gRPC status name it counts under. `transport`: the connection could not carry it.
#[derive(Debug)]
struct Fail {
    name: String,
    transport: bool,
}

fn fail(name: &str) -> Fail {
    Fail { name: name.into(), transport: false }
}

/// h2 errors to gRPC codes, as grpc-js maps them.
fn h2_fail(e: h2::Error) -> Fail {
    if e.is_io() || e.is_go_away() {
        return Fail { name: "UNAVAILABLE".into(), transport: true };
    }
    let name = match e.reason() {
        Some(h2::Reason::REFUSED_STREAM) => "UNAVAILABLE",
        Some(h2::Reason::CANCEL) => "CANCELLED",
        Some(h2::Reason::ENHANCE_YOUR_CALM) => "RESOURCE_EXHAUSTED",
        Some(h2::Reason::INADEQUATE_SECURITY) => "PERMISSION_DENIED",
        _ => "INTERNAL",
    };
    fail(name)
}

/// HTTP status to gRPC code, per the gRPC spec (http-grpc-status-mapping.md).
fn http_fail(status: StatusCode) -> Fail {
    fail(match status.as_u16() {
        400 => "INTERNAL",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "UNIMPLEMENTED",
        429 | 502 | 503 | 504 => "UNAVAILABLE",
        _ => "UNKNOWN",
    })
}

fn grpc_status(headers: &HeaderMap) -> Option<u32> {
    headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}

fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The ticket id of a gRPC-framed CreateTicketResponse (`string ticket_id = 1`), None if it does not parse.
fn response_ticket_id(body: &[u8]) -> Option<&[u8]> {
    let header = body.get(..5)?;
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if header[0] != 0 || body.len() != 5 + len {
        return None; // compressed (never asked for), or not exactly one message
    }
    let msg = &body[5..];
    let (mut pos, mut id) = (0usize, &msg[..0]); // proto3: an absent string is ""
    while pos < msg.len() {
        let (key, n) = varint(&msg[pos..])?;
        pos += n;
        let end = match key & 7 {
            0 => pos + varint(&msg[pos..])?.1,
            1 => pos + 8,
            5 => pos + 4,
            2 => {
                let (l, n) = varint(&msg[pos..])?;
                pos += n;
                pos.checked_add(usize::try_from(l).ok()?)?
            }
            _ => return None,
        };
        let value = msg.get(pos..end)?;
        if key == (1 << 3 | 2) {
            id = value;
        }
        pos = end;
    }
    Some(id)
}

/// One CreateTicket call on `conn`; Ok when it is answered OK with `id`.
async fn call(conn: &SendRequest<Bytes>, uri: &Uri, headers: &HeaderMap, body: Bytes, id: &[u8]) -> Result<(), Fail> {
    let transport = |e: h2::Error| Fail { transport: true, ..h2_fail(e) };
    let mut sender = conn.clone().ready().await.map_err(transport)?;
    let mut req = Request::new(());
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers.clone();
    let (response, mut stream) = sender.send_request(req, false).map_err(transport)?;
    stream.send_data(body, true).map_err(transport)?;
    let (head, mut recv) = response.await.map_err(h2_fail)?.into_parts();
    if head.status != StatusCode::OK {
        return Err(http_fail(head.status));
    }
    let mut data = Vec::new();
    let code = match grpc_status(&head.headers) {
        Some(code) => code, // trailers-only response
        None => {
            while let Some(chunk) = recv.data().await {
                let chunk = chunk.map_err(h2_fail)?;
                let _ = recv.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
            }
            let trailers = recv.trailers().await.map_err(h2_fail)?;
            trailers.as_ref().and_then(grpc_status).unwrap_or(2) // no status: UNKNOWN
        }
    };
    match code {
        0 if response_ticket_id(&data) == Some(id) => Ok(()),
        0 => Err(fail("BAD_RESPONSE")),
        code => Err(fail(&code_name(code))),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Statistics

/// Nearest rank, as create-ticket-load.ts: the smallest sample with at least p of the samples at or below.
fn percentile(sorted: &[u32], p: f64) -> Option<u32> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((p * n as f64).ceil() as i64 - 1).clamp(0, n as i64 - 1);
    Some(sorted[rank as usize])
}

fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

fn ms(us: Option<u32>) -> String {
    json_num(us.map_or(f64::NAN, |u| u as f64 / 1000.0))
}

/// This process's user + system CPU, seconds (Linux; USER_HZ is 100 on every Linux ABI).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (field(11) + field(12)) / 100.0 // utime, stime (fields 14 and 15 of the whole line)
}

fn us_between(from: Instant, to: Instant) -> u32 {
    to.saturating_duration_since(from).as_micros().min(u32::MAX as u128) as u32
}

// ---------------------------------------------------------------------------------------------------------
// The run

struct Shared {
    cfg: Config,
    conns: Vec<SendRequest<Bytes>>,
    templates: Vec<Template>,
    uri: Uri,
    headers: HeaderMap,
    measure_from: Instant,
    measure_to: Instant,
    st: RefCell<State>,
}

#[derive(Default)]
struct State {
    rng: Option<Rng>,
    next: usize,
    sent: u64,
    ok: u64,
    ok_in_window: u64,
    in_flight: usize,
    errors: BTreeMap<String, u64>,
    latencies_us: Vec<u32>,
    /// fixed mode: scheduled times of due requests held back by the in-flight cap.
    backlog: VecDeque<Instant>,
    /// fixed mode: a finished call sends the oldest held-back request (until the drain times out).
    refill: bool,
    /// Summed up: later answers are not counted.
    finished: bool,
    tick_lags_us: Vec<u32>,
    cpu_start: Option<f64>,
    cpu_end: Option<f64>,
}

/// A request ready to go, already counted as sent and in flight.
struct Prepared {
    conn: usize,
    body: Bytes,
    id: [u8; UUID_LEN],
    start: Instant,
    measured: bool,
}

fn prepare(sh: &Shared, start: Instant) -> Prepared {
    let mut st = sh.st.borrow_mut();
    let k = st.next;
    st.next += 1;
    let id = uuid_v4(st.rng.get_or_insert_with(Rng::from_time));
    let body = frame_request(&sh.templates[k % sh.templates.len()], &id);
    let measured = start >= sh.measure_from && start < sh.measure_to;
    st.sent += measured as u64;
    st.in_flight += 1;
    Prepared { conn: k % sh.conns.len(), body, id, start, measured }
}

/// Runs a prepared call and records it; true if it failed for want of a usable connection.
async fn complete(sh: Rc<Shared>, p: Prepared) -> bool {
    let deadline = Duration::from_millis(sh.cfg.deadline_ms);
    let outcome = timeout(deadline, call(&sh.conns[p.conn], &sh.uri, &sh.headers, p.body, &p.id))
        .await
        .unwrap_or_else(|_| Err(fail("DEADLINE_EXCEEDED")));
    let now = Instant::now();
    let mut st = sh.st.borrow_mut();
    st.in_flight -= 1;
    if st.finished {
        return false;
    }
    if outcome.is_ok() && now >= sh.measure_from && now < sh.measure_to {
        st.ok_in_window += 1;
    }
    if p.measured {
        match &outcome {
            Ok(()) => {
                st.ok += 1;
                st.latencies_us.push(us_between(p.start, now));
            }
            Err(f) => *st.errors.entry(f.name.clone()).or_default() += 1,
        }
    }
    if st.refill {
        if let Some(next) = st.backlog.pop_front() {
            drop(st);
            launch(&sh, next);
        }
    }
    matches!(outcome, Err(Fail { transport: true, .. }))
}

fn launch(sh: &Rc<Shared>, start: Instant) {
    let p = prepare(sh, start);
    spawn_local(complete(sh.clone(), p));
}

async fn closed_worker(sh: Rc<Shared>) {
    loop {
        let now = Instant::now();
        if now >= sh.measure_to {
            return;
        }
        let p = prepare(&sh, now);
        if complete(sh.clone(), p).await {
            sleep(Duration::from_millis(1)).await; // connection gone: do not spin on instant failures
        }
    }
}

/// The open-loop send schedule; returns (largest backlog, worst lag behind schedule).
async fn fixed_schedule(sh: Rc<Shared>, t0: Instant) -> (usize, Duration) {
    let rate = sh.cfg.rate;
    let total = ((sh.measure_to - t0).as_secs_f64() * rate).floor() as u64;
    let due = |k: u64| t0 + Duration::from_secs_f64(k as f64 / rate);
    let (mut k, mut max_backlog, mut max_lag) = (0u64, 0usize, Duration::ZERO);
    while k < total {
        let now = Instant::now();
        while k < total && due(k) <= now {
            let scheduled = due(k);
            max_lag = max_lag.max(now - scheduled);
            let free = {
                let st = sh.st.borrow();
                st.in_flight < sh.cfg.max_in_flight && st.backlog.is_empty()
            };
            if free {
                launch(&sh, scheduled);
            } else {
                sh.st.borrow_mut().backlog.push_back(scheduled);
            }
            k += 1;
        }
        max_backlog = max_backlog.max(sh.st.borrow().backlog.len());
        if k < total {
            sleep_until(due(k).into()).await;
        }
    }
    (max_backlog, max_lag)
}

/// Marks the measured window (stderr lines, CPU samples) and measures how late a 10 ms timer fires in it.
async fn window_and_ticks(sh: Rc<Shared>) {
    let mut started = false;
    loop {
        let now = Instant::now();
        if !started && now >= sh.measure_from {
            started = true;
            sh.st.borrow_mut().cpu_start = Some(cpu_secs());
            eprintln!("measure-start");
        }
        if now >= sh.measure_to {
            sh.st.borrow_mut().cpu_end = Some(cpu_secs());
            eprintln!("measure-end");
            return;
        }
        let target = (now + TICK).min(if started { sh.measure_to } else { sh.measure_from });
        sleep_until(target.into()).await;
        let lag = us_between(target, Instant::now());
        if started && target < sh.measure_to && now + TICK == target {
            sh.st.borrow_mut().tick_lags_us.push(lag);
        }
    }
}

async fn connect(target: &str) -> Result<SendRequest<Bytes>, String> {
    let tcp = timeout(Duration::from_secs(10), TcpStream::connect(target))
        .await
        .map_err(|_| format!("cannot connect to {target}: timed out"))?
        .map_err(|e| format!("cannot connect to {target}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let (sender, connection) =
        h2::client::handshake(tcp).await.map_err(|e| format!("h2 handshake with {target}: {e}"))?;
    spawn_local(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

async fn run(cfg: Config, templates: Vec<Template>) -> Result<String, String> {
    let mut conns = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections {
        conns.push(connect(&cfg.target).await?);
    }
    let uri: Uri = format!("http://{}{PATH}", cfg.target).parse().map_err(|e| format!("bad --target: {e}"))?;
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers.insert("te", HeaderValue::from_static("trailers"));
    headers.insert("grpc-timeout", HeaderValue::from_str(&format!("{}m", cfg.deadline_ms.min(99_999_999))).unwrap());
    headers.insert("user-agent", HeaderValue::from_static("matchmaker-loadgen/0.1"));

    let t0 = Instant::now();
    let measure_from = t0 + Duration::from_secs_f64(cfg.warmup_secs);
    let measure_to = measure_from + Duration::from_secs_f64(cfg.duration_secs);
    let (mode, concurrency, drain_timeout) = (cfg.mode, cfg.concurrency, Duration::from_millis(cfg.drain_timeout_ms));
    let st = State { refill: true, latencies_us: Vec::with_capacity(1 << 16), ..State::default() };
    let sh = Rc::new(Shared { cfg, conns, templates, uri, headers, measure_from, measure_to, st: RefCell::new(st) });
    let window = spawn_local(window_and_ticks(sh.clone()));

    let (max_backlog, max_lag) = match mode {
        Mode::Closed => {
            for _ in 0..concurrency {
                spawn_local(closed_worker(sh.clone()));
            }
            sleep_until(measure_to.into()).await;
            (0, Duration::ZERO)
        }
        Mode::Fixed => fixed_schedule(sh.clone(), t0).await,
    };
    let _ = window.await;

    // Drain: outstanding calls (and, in fixed mode, the backlog) until the drain timeout.
    let drain_until = Instant::now() + drain_timeout;
    loop {
        let idle = {
            let st = sh.st.borrow();
            st.in_flight == 0 && st.backlog.is_empty()
        };
        if idle || Instant::now() >= drain_until {
            break;
        }
        sleep(Duration::from_millis(5)).await;
    }

    let mut st = sh.st.borrow_mut();
    st.finished = true;
    st.refill = false;
    let abandoned = st.in_flight;
    if abandoned > 0 {
        st.errors.insert("DRAIN_TIMEOUT".into(), abandoned as u64);
    }
    let unsent = st.backlog.iter().filter(|&&s| s >= measure_from && s < measure_to).count();
    let secs = sh.cfg.duration_secs;
    let cpu = match (st.cpu_start, st.cpu_end) {
        (Some(a), Some(b)) => (b - a) / secs,
        _ => f64::NAN,
    };
    let mut lat = std::mem::take(&mut st.latencies_us);
    lat.sort_unstable();
    let mean = lat.iter().map(|&u| u as f64).sum::<f64>() / lat.len() as f64 / 1000.0;
    let mut ticks = std::mem::take(&mut st.tick_lags_us);
    ticks.sort_unstable();
    let errors: Vec<String> = st.errors.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    Ok(format!(
        concat!(
            "{{\"measuredSecs\":{},\"sent\":{},\"ok\":{},\"errors\":{{{}}},\"throughput\":{},",
            "\"latencyMs\":{{\"count\":{},\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{},\"mean\":{}}},",
            "\"unsent\":{},\"maxBacklog\":{},\"maxScheduleLagMs\":{},\"abandoned\":{},\"clientCpu\":{},",
            "\"clientLoopDelayMs\":{{\"p99\":{},\"max\":{}}}}}"
        ),
        json_num(secs),
        st.sent,
        st.ok,
        errors.join(","),
        json_num(st.ok_in_window as f64 / secs),
        lat.len(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.9)),
        ms(percentile(&lat, 0.99)),
        ms(percentile(&lat, 0.999)),
        ms(lat.last().copied()),
        json_num(mean),
        unsent,
        max_backlog,
        json_num(max_lag.as_secs_f64() * 1000.0),
        abandoned,
        json_num(cpu),
        ms(percentile(&ticks, 0.99)),
        ms(ticks.last().copied()),
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return;
    }
    let exit = |msg: String, code: i32| -> ! {
        eprintln!("loadgen: {msg}");
        std::process::exit(code)
    };
    let cfg = parse_args(&args).unwrap_or_else(|e| exit(e, 2));
    let data = std::fs::read(&cfg.requests).unwrap_or_else(|e| exit(format!("{}: {e}", cfg.requests), 2));
    let templates = parse_templates(&data).unwrap_or_else(|e| exit(e, 2));
    let rt =
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| exit(e.to_string(), 1));
    match tokio::task::LocalSet::new().block_on(&rt, run(cfg, templates)) {
        Ok(json) => {
            println!("{json}");
            // Calls abandoned by the drain timeout are still in the runtime: do not wait for them.
            std::process::exit(0);
        }
        Err(e) => exit(e, 1),
    }
}

// ---------------------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v4_format() {
        let mut rng = Rng(1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let id = uuid_v4(&mut rng);
            let s = std::str::from_utf8(&id).unwrap();
            for (i, c) in s.char_indices() {
                match i {
                    8 | 13 | 18 | 23 => assert_eq!(c, '-', "{s}"),
                    14 => assert_eq!(c, '4', "{s}"),
                    19 => assert!("89ab".contains(c), "{s}"),
                    _ => assert!(c.is_ascii_digit() || ('a'..='f').contains(&c), "{s}"),
                }
            }
            assert!(seen.insert(id));
        }
    }

    fn framed(msg: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        out.extend_from_slice(msg);
        out
    }

    #[test]
    fn response_parsing() {
        let id = b"0f8fad5b-d9cb-469f-a165-70867728950e";
        let mut msg = vec![0x0a, 36];
        msg.extend_from_slice(id);
        assert_eq!(response_ticket_id(&framed(&msg)), Some(&id[..]));
        // An unknown varint field after it is skipped.
        msg.extend_from_slice(&[0x10, 0x96, 0x01]);
        assert_eq!(response_ticket_id(&framed(&msg)), Some(&id[..]));
        // Empty message: ticket_id "".
        assert_eq!(response_ticket_id(&framed(&[])), Some(&b""[..]));
        // Truncated, compressed, trailing bytes, no frame.
        assert_eq!(response_ticket_id(&framed(&msg[..20])), None);
        let mut compressed = framed(&msg);
        compressed[0] = 1;
        assert_eq!(response_ticket_id(&compressed), None);
        let mut trailing = framed(&msg);
        trailing.push(0);
        assert_eq!(response_ticket_id(&trailing), None);
        assert_eq!(response_ticket_id(&[0, 0]), None);
        assert_eq!(code_name(14), "UNAVAILABLE");
        assert_eq!(code_name(4), "DEADLINE_EXCEEDED");
        assert_eq!(code_name(42), "CODE_42");
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let samples: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile(&samples, 0.5), Some(500));
        assert_eq!(percentile(&samples, 0.99), Some(990));
        assert_eq!(percentile(&samples, 0.999), Some(999));
        assert_eq!(percentile(&samples, 1.0), Some(1000));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[1, 2], 0.5), Some(1));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(ms(Some(1500)), "1.5");
        assert_eq!(ms(None), "null");
    }

    #[test]
    fn templates_and_framing() {
        let placeholder = b"00000000-0000-4000-8000-000000000000";
        let mut request = vec![0x0a, 40, 0x0a, 36];
        request.extend_from_slice(placeholder);
        let mut file = 1u32.to_le_bytes().to_vec();
        file.extend_from_slice(&(request.len() as u32).to_le_bytes());
        file.extend_from_slice(&4u32.to_le_bytes());
        file.extend_from_slice(&request);
        let templates = parse_templates(&file).unwrap();
        let id = uuid_v4(&mut Rng(7));
        let body = frame_request(&templates[0], &id);
        assert_eq!(&body[..5], &[0, 0, 0, 0, 40]);
        assert_eq!(&body[5..9], &[0x0a, 40, 0x0a, 36]);
        assert_eq!(&body[9..], &id[..]);
        assert!(parse_templates(&file[..file.len() - 1]).is_err());
    }
}
