//! A small pool owned by a test, built ticket by ticket, for the tests of the tick's modules.

use crate::PoolColumns;

pub(super) struct TestPool {
    party: Vec<u8>,
    mmr: Vec<f64>,
    arrival: Vec<f64>,
    mask: Vec<u32>,
    values: Vec<u64>,
    accepts: Vec<u64>,
    latency: Vec<u16>,
    f: usize,
    h: usize,
}

impl TestPool {
    /// `f` filters, `h` hosts.
    pub(super) fn new(f: usize, h: usize) -> Self {
        let (party, mmr, arrival, mask) = (vec![], vec![], vec![], vec![]);
        TestPool { party, mmr, arrival, mask, values: vec![], accepts: vec![], latency: vec![], f, h }
    }

    /// A ticket in ruleset 0, unspecified in every (overlap) filter, 50 ms from every host.
    pub(super) fn ticket(&mut self, party: u8, mmr: f64, arrival_ms: f64) -> &mut Self {
        self.party.push(party);
        self.mmr.push(mmr);
        self.arrival.push(arrival_ms);
        self.mask.push(1);
        self.values.extend(std::iter::repeat_n(u64::MAX, self.f));
        self.accepts.extend(std::iter::repeat_n(u64::MAX, self.f));
        self.latency.extend(std::iter::repeat_n(50, self.h));
        self
    }

    /// Sets the last ticket's ruleset mask.
    pub(super) fn mask(&mut self, mask: u32) -> &mut Self {
        *self.mask.last_mut().unwrap() = mask;
        self
    }

    /// Sets the last ticket's (values, accepts) of filter k.
    pub(super) fn attr(&mut self, k: usize, values: u64, accepts: u64) -> &mut Self {
        self.set_attr(self.party.len() - 1, k, values, accepts)
    }

    /// Sets ticket i's (values, accepts) of filter k.
    pub(super) fn set_attr(&mut self, i: usize, k: usize, values: u64, accepts: u64) -> &mut Self {
        let at = i * self.f + k;
        (self.values[at], self.accepts[at]) = (values, accepts);
        self
    }

    /// Sets the last ticket's latencies.
    pub(super) fn latency(&mut self, latency_ms: &[u16]) -> &mut Self {
        let at = self.latency.len() - self.h;
        self.latency[at..].copy_from_slice(latency_ms);
        self
    }

    pub(super) fn columns(&self) -> PoolColumns<'_> {
        PoolColumns {
            party_size: &self.party,
            mmr_mean: &self.mmr,
            arrival_ms: &self.arrival,
            ruleset_mask: &self.mask,
            attr_values: &self.values,
            attr_accepts: &self.accepts,
            latency_ms: &self.latency,
            filter_count: self.f,
            host_count: self.h,
        }
    }
}
