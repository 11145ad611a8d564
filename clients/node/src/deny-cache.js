// The edge pre-filter idea in-process: once Redis said "denied, retry in r ms", the same
// request is denied locally until then. Safe because r is the *smallest* wait after
// which Redis would admit the request if nothing else arrived, more arrivals only delay
// it, and a bigger cost only waits longer. What only the server sees (a REFUND or
// RESET from another process) can end a denial early; this process's own refunds and
// resets clear the entries they touch.

function shift(decision, elapsed) {
  const later = (ms) => Math.max(0, Math.ceil(ms - elapsed));
  return {
    ...decision,
    retryAfter: decision.retryAfter > 0 && Number.isFinite(decision.retryAfter) ? later(decision.retryAfter) : decision.retryAfter,
    resetAfter: later(decision.resetAfter),
  };
}

export class DenyCache {
  #entries = new Map();
  #maxEntries;

  constructor({ maxEntries = 10_000 } = {}) {
    this.#maxEntries = maxEntries;
  }

  /**
   * A denial still in force for this request, or undefined.
   * @param {string} signature the limits and keys (not the cost)
   * @param {number[]} costs
   * @param {number} nowMs
   */
  lookup(signature, costs, nowMs) {
    const entry = this.#entries.get(signature);
    if (!entry) return undefined;
    if (nowMs >= entry.until) {
      this.#entries.delete(signature);
      return undefined;
    }
    // A cheaper request may pass sooner than the one that was denied.
    if (costs.some((cost, i) => cost < entry.costs[i])) return undefined;
    const elapsed = nowMs - entry.at;
    const { decision } = entry;
    return { ...shift(decision, elapsed), limits: decision.limits.map((d) => shift(d, elapsed)), source: 'cache' };
  }

  /**
   * @param {number} atMs when the request was sent (the server decided at or after it)
   * @param {import('../index.js').Decision} decision
   */
  remember(signature, costs, atMs, decision) {
    if (decision.allowed || !Number.isFinite(decision.retryAfter)) return;
    this.#entries.delete(signature);
    this.#entries.set(signature, { until: atMs + decision.retryAfter, at: atMs, costs, decision });
    // Oldest first: a Map iterates in insertion order.
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(oldest);
    }
  }

  /** Drops every denial that involves one of these keys. */
  forget(keys) {
    for (const [signature, entry] of this.#entries) {
      if (entry.decision.limits.some((d) => keys.includes(d.key))) this.#entries.delete(signature);
    }
  }

  get size() {
    return this.#entries.size;
  }
}
