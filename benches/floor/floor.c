/* The floor: what RL.FIXED, RL.SLIDECOUNT, RL.GCRA and RL.SLIDELOG cost with the
 * module API and nothing else. No engine, no tables, no allocation the API does not
 * make itself; every effect redis-rl has on those paths is here too:
 *
 *   - the derived key name built (FIXED, SLIDECOUNT) and checked against the
 *     caller's ACL (GetCurrentUserName, GetModuleUserFromUserName,
 *     ACLCheckKeyPermissions), as Redis cannot check a key that is no argument;
 *   - the OOM refusal of a spending call (the commands are not deny-oom);
 *   - the key opened, read (StringDMA), written in place (StringDMA, StringTruncate
 *     when the length changes), its TTL set on creation;
 *   - the writes replicated as core commands with absolute times (INCRBY +
 *     PEXPIREAT on creation; SET ... PXAT; ZREMRANGEBYSCORE, ZADD, PEXPIREAT);
 *   - the keyspace events the scripts' commands fire, and the modified-key signal
 *     (WATCH, client tracking) for the keys actually written;
 *   - four integers in the reply.
 *
 * Loaded with the argument `integer-values`, counters and TATs are stored as the
 * scripts' INCR and SET store them (an integer, shared below 10,000), which the key
 * API cannot do: the key is closed and Redis's own INCRBY, PEXPIREAT and SET ... PXAT
 * run through RedisModule_Call with "!", which replicate, announce and signal
 * themselves. That is redis-rl's default (rl.integer-values yes), at its floor.
 *
 * Loaded with `acl-filter`, it also registers the command filter an ACL cache would
 * need (every command's name looked at, a generation bumped on ACL, AUTH, HELLO and
 * RESET), so that `make instructions` can show what that costs every other command.
 *
 * Arguments: FLOOR.<ALGO> <key> <limit> <window s> NOW <µs> [BURST <n>] (BURST: GCRA).
 * Only a benchmark reference (`make instructions`); it checks little else. */
#define REDISMODULE_MAIN
#include "redismodule.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static RedisModuleString *ONE, *NEGINF, *PXAT;
static int integers;

static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
    long long limit, window_us, now, burst;
} Args;

static int parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, Args *a) {
    size_t len;
    long long window_s;
    if (argc != 6 && argc != 8) return RedisModule_WrongArity(ctx), 0;
    const char *now = RedisModule_StringPtrLen(argv[4], &len);
    if (RedisModule_StringToLongLong(argv[2], &a->limit) != REDISMODULE_OK || a->limit < 1 ||
        RedisModule_StringToLongLong(argv[3], &window_s) != REDISMODULE_OK || window_s < 1 ||
        len != 3 || strncasecmp(now, "NOW", 3) != 0 ||
        RedisModule_StringToLongLong(argv[5], &a->now) != REDISMODULE_OK || a->now < 0) {
        RedisModule_ReplyWithError(ctx, "ERR syntax");
        return 0;
    }
    a->window_us = window_s * 1000000;
    a->burst = a->limit;
    if (argc == 8 && RedisModule_StringToLongLong(argv[7], &a->burst) != REDISMODULE_OK) {
        RedisModule_ReplyWithError(ctx, "ERR syntax");
        return 0;
    }
    return 1;
}

static int oom(RedisModuleCtx *ctx) {
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_OOM) {
        RedisModule_ReplyWithError(ctx, "OOM");
        return 1;
    }
    return 0;
}

static void reply4(RedisModuleCtx *ctx, long long a, long long b, long long c, long long d) {
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, a);
    RedisModule_ReplyWithLongLong(ctx, b);
    RedisModule_ReplyWithLongLong(ctx, c);
    RedisModule_ReplyWithLongLong(ctx, d);
}

static int u2s(unsigned long long n, char *buf) {
    char tmp[20];
    int i = 0, len;
    do { tmp[i++] = '0' + n % 10; n /= 10; } while (n);
    len = i;
    while (i) *buf++ = tmp[--i];
    return len;
}

/* <key>:<n> */
static RedisModuleString *derived(RedisModuleCtx *ctx, RedisModuleString *key, unsigned long long n) {
    size_t len;
    const char *base = RedisModule_StringPtrLen(key, &len);
    char buf[256];
    if (len > sizeof(buf) - 22) return NULL;
    memcpy(buf, base, len);
    buf[len] = ':';
    len += 1 + u2s(n, buf + len + 1);
    return RedisModule_CreateString(ctx, buf, len);
}

/* The caller's user, looked up once per call. */
typedef struct {
    int looked;
    RedisModuleUser *user;
    int anyone;
} Caller;

static int acl_ok(RedisModuleCtx *ctx, Caller *c, RedisModuleString *key, int write) {
    if (!c->looked) {
        RedisModuleString *name = RedisModule_GetCurrentUserName(ctx);
        c->looked = 1;
        c->anyone = name == NULL;
        if (name) {
            c->user = RedisModule_GetModuleUserFromUserName(name);
            RedisModule_FreeString(ctx, name);
        }
    }
    if (c->anyone) return 1;
    if (!c->user) return 0;
    int flags = REDISMODULE_CMD_KEY_ACCESS;
    if (write) flags |= REDISMODULE_CMD_KEY_UPDATE | REDISMODULE_CMD_KEY_INSERT;
    return RedisModule_ACLCheckKeyPermissions(c->user, key, flags) == REDISMODULE_OK;
}

static void caller_free(Caller *c) {
    if (c->user) RedisModule_FreeModuleUser(c->user);
}

/* A non-negative integer string, as INCRBY and the module keep one. */
static int read_int(RedisModuleKey *k, long long *out) {
    int t = RedisModule_KeyType(k);
    *out = 0;
    if (t == REDISMODULE_KEYTYPE_EMPTY) return 1;
    if (t != REDISMODULE_KEYTYPE_STRING) return 0;
    size_t len;
    const char *p = RedisModule_StringDMA(k, &len, REDISMODULE_READ);
    if (!p || len == 0 || len > 19) return 0;
    long long n = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        n = n * 10 + (p[i] - '0');
    }
    *out = n;
    return 1;
}

/* Writes `n` in place: StringTruncate only when its length changes. */
static int write_int(RedisModuleKey *k, long long n, size_t old_len) {
    char buf[20];
    size_t len = (size_t)u2s((unsigned long long)n, buf), have;
    if (len != old_len && RedisModule_StringTruncate(k, len) != REDISMODULE_OK) return 0;
    char *p = RedisModule_StringDMA(k, &have, REDISMODULE_WRITE);
    if (!p || have != len) return 0;
    memcpy(p, buf, len);
    return 1;
}

static int digits(long long n) {
    char buf[20];
    return u2s((unsigned long long)n, buf);
}

/* Runs a core command through RM_Call, replicated ("!"); 0 on an error reply. */
static int run(RedisModuleCtx *ctx, RedisModuleCallReply *r) {
    int ok = r && RedisModule_CallReplyType(r) != REDISMODULE_REPLY_ERROR;
    if (r) RedisModule_FreeCallReply(r);
    return ok;
}

/* INCRBY <by> on an open counter holding `value` (a window counter's spend). With
 * integer values the key is closed here (*kp = NULL): Redis's INCRBY writes it. */
static int incrby(RedisModuleCtx *ctx, RedisModuleKey **kp, RedisModuleString *name,
                  long long value, int created, long long ttl_ms) {
    if (integers) {
        RedisModule_CloseKey(*kp);
        *kp = NULL;
        if (!run(ctx, RedisModule_Call(ctx, "INCRBY", "!ss", name, ONE))) return 0;
        if (created) {
            RedisModuleString *at = RedisModule_CreateStringFromLongLong(ctx, wall_ms() + ttl_ms);
            int ok = run(ctx, RedisModule_Call(ctx, "PEXPIREAT", "!ss", name, at));
            RedisModule_FreeString(ctx, at);
            return ok;
        }
        return 1;
    }
    RedisModuleKey *k = *kp;
    if (!write_int(k, value + 1, created ? 0 : (size_t)digits(value))) return 0;
    RedisModule_Replicate(ctx, "INCRBY", "ss", name, ONE);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STRING, "incrby", name);
    if (created) {
        long long at = wall_ms() + ttl_ms;
        RedisModule_SetAbsExpire(k, at);
        RedisModule_Replicate(ctx, "PEXPIREAT", "sl", name, at);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", name);
    }
    RedisModule_SignalModifiedKey(ctx, name);
    return 1;
}

static int FixedCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    Args a;
    if (!parse(ctx, argv, argc, &a) || oom(ctx)) return REDISMODULE_OK;
    long long start = a.now - a.now % a.window_us;
    RedisModuleString *name = derived(ctx, argv[1], (unsigned long long)(start / 1000000));
    Caller caller = {0};
    if (!name || !acl_ok(ctx, &caller, name, 1)) {
        caller_free(&caller);
        if (name) RedisModule_FreeString(ctx, name);
        return RedisModule_ReplyWithError(ctx, "NOPERM");
    }
    caller_free(&caller);
    RedisModuleKey *k = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    long long count;
    if (!read_int(k, &count)) {
        RedisModule_CloseKey(k);
        RedisModule_FreeString(ctx, name);
        return RedisModule_ReplyWithError(ctx, "ERR not a counter");
    }
    int allowed = count + 1 <= a.limit;
    long long until_next_ms = (start + a.window_us - a.now + 999) / 1000;
    if (allowed) {
        int created = RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_EMPTY;
        incrby(ctx, &k, name, count, created, 2 * a.window_us / 1000);
        count++;
    }
    RedisModule_CloseKey(k);
    RedisModule_FreeString(ctx, name);
    reply4(ctx, allowed, a.limit > count ? a.limit - count : 0, allowed ? 0 : until_next_ms,
           count ? until_next_ms : 0);
    return REDISMODULE_OK;
}

static int SlideCountCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    Args a;
    if (!parse(ctx, argv, argc, &a) || oom(ctx)) return REDISMODULE_OK;
    long long i = a.now / a.window_us;
    RedisModuleString *cur = derived(ctx, argv[1], (unsigned long long)i);
    RedisModuleString *prev = derived(ctx, argv[1], (unsigned long long)(i - 1));
    Caller caller = {0};
    int ok = cur && prev && acl_ok(ctx, &caller, cur, 1) && acl_ok(ctx, &caller, prev, 0);
    caller_free(&caller);
    if (!ok) {
        if (cur) RedisModule_FreeString(ctx, cur);
        if (prev) RedisModule_FreeString(ctx, prev);
        return RedisModule_ReplyWithError(ctx, "NOPERM");
    }
    RedisModuleKey *kc = RedisModule_OpenKey(ctx, cur, REDISMODULE_READ | REDISMODULE_WRITE);
    RedisModuleKey *kp = RedisModule_OpenKey(ctx, prev, REDISMODULE_READ);
    long long c, p;
    int read = read_int(kc, &c) && read_int(kp, &p);
    RedisModule_CloseKey(kp);
    if (!read) {
        RedisModule_CloseKey(kc);
        RedisModule_FreeString(ctx, cur);
        RedisModule_FreeString(ctx, prev);
        return RedisModule_ReplyWithError(ctx, "ERR not a counter");
    }
    long long elapsed = a.now % a.window_us;
    long long est = c + (long long)((__int128)p * (a.window_us - elapsed) / a.window_us);
    int allowed = est + 1 <= a.limit;
    if (allowed) {
        int created = RedisModule_KeyType(kc) == REDISMODULE_KEYTYPE_EMPTY;
        incrby(ctx, &kc, cur, c, created, 2 * a.window_us / 1000);
        est++;
    }
    RedisModule_CloseKey(kc);
    RedisModule_FreeString(ctx, cur);
    RedisModule_FreeString(ctx, prev);
    long long left_ms = (a.window_us - elapsed + 999) / 1000;
    reply4(ctx, allowed, a.limit > est ? a.limit - est : 0, allowed ? 0 : left_ms,
           est ? left_ms + a.window_us / 1000 : 0);
    return REDISMODULE_OK;
}

static int GcraCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    Args a;
    if (!parse(ctx, argv, argc, &a) || oom(ctx)) return REDISMODULE_OK;
    RedisModuleString *name = argv[1];
    RedisModuleKey *k = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    long long tat;
    if (!read_int(k, &tat)) {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, "ERR not a TAT");
    }
    long long interval = a.window_us / a.limit, tolerance = a.burst * interval;
    if (tat < a.now) tat = a.now;
    long long new_tat = tat + interval;
    int allowed = new_tat - a.now <= tolerance;
    if (allowed && integers) {
        long long at = wall_ms() + (new_tat - a.now + 999) / 1000;
        RedisModule_CloseKey(k);
        k = NULL;
        run(ctx, RedisModule_Call(ctx, "SET", "!slsl", name, new_tat, PXAT, at));
        tat = new_tat;
    } else if (allowed) {
        long long at = wall_ms() + (new_tat - a.now + 999) / 1000;
        RedisModuleString *value = RedisModule_CreateStringFromLongLong(ctx, new_tat);
        size_t len, have;
        const char *v = RedisModule_StringPtrLen(value, &len);
        int created = RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_EMPTY;
        if (created || RedisModule_ValueLength(k) != len) RedisModule_StringTruncate(k, len);
        char *p = RedisModule_StringDMA(k, &have, REDISMODULE_WRITE);
        if (p && have == len) memcpy(p, v, len);
        RedisModule_SetAbsExpire(k, at);
        RedisModule_Replicate(ctx, "SET", "sssl", name, value, PXAT, at);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STRING, "set", name);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", name);
        RedisModule_SignalModifiedKey(ctx, name);
        RedisModule_FreeString(ctx, value);
        tat = new_tat;
    }
    RedisModule_CloseKey(k);
    long long ahead = tat - a.now;
    reply4(ctx, allowed, ahead > tolerance ? 0 : (tolerance - ahead) / interval,
           allowed ? 0 : (new_tat - tolerance - a.now + 999) / 1000, (ahead + 999) / 1000);
    return REDISMODULE_OK;
}

static uint64_t rng_state;

static uint64_t rng(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int SlideLogCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    Args a;
    if (!parse(ctx, argv, argc, &a) || oom(ctx)) return REDISMODULE_OK;
    RedisModuleString *name = argv[1];
    RedisModuleKey *k = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    int t = RedisModule_KeyType(k);
    if (t != REDISMODULE_KEYTYPE_EMPTY && t != REDISMODULE_KEYTYPE_ZSET) {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, "WRONGTYPE");
    }
    double cutoff = (double)(a.now - a.window_us);
    long long removed = 0, total = 0, oldest = -1, newest = -1;
    if (t == REDISMODULE_KEYTYPE_ZSET) {
        /* The trim: members at or below the cutoff, removed through the key API. */
        RedisModuleString *expired[16];
        int n = 0;
        if (RedisModule_ZsetFirstInScoreRange(k, REDISMODULE_NEGATIVE_INFINITE, cutoff, 0, 0) ==
            REDISMODULE_OK) {
            while (!RedisModule_ZsetRangeEndReached(k) && n < 16) {
                expired[n++] = RedisModule_ZsetRangeCurrentElement(k, NULL);
                if (!RedisModule_ZsetRangeNext(k)) break;
            }
            RedisModule_ZsetRangeStop(k);
        }
        for (int j = 0; j < n; j++) {
            RedisModule_ZsetRem(k, expired[j], NULL);
            RedisModule_FreeString(ctx, expired[j]);
        }
        removed = n;
        total = (long long)RedisModule_ValueLength(k);
        double score;
        if (RedisModule_ZsetFirstInScoreRange(k, cutoff, REDISMODULE_POSITIVE_INFINITE, 1, 0) ==
            REDISMODULE_OK) {
            if (!RedisModule_ZsetRangeEndReached(k)) {
                RedisModule_FreeString(ctx, RedisModule_ZsetRangeCurrentElement(k, &score));
                oldest = (long long)score;
            }
            RedisModule_ZsetRangeStop(k);
        }
        if (RedisModule_ZsetLastInScoreRange(k, cutoff, REDISMODULE_POSITIVE_INFINITE, 1, 0) ==
            REDISMODULE_OK) {
            if (!RedisModule_ZsetRangeEndReached(k)) {
                RedisModule_FreeString(ctx, RedisModule_ZsetRangeCurrentElement(k, &score));
                newest = (long long)score;
            }
            RedisModule_ZsetRangeStop(k);
        }
    }
    if (removed) {
        RedisModule_Replicate(ctx, "ZREMRANGEBYSCORE", "ssl", name, NEGINF, (long long)cutoff);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_ZSET, "zremrangebyscore", name);
    }
    int allowed = total + 1 <= a.limit;
    if (allowed) {
        char member[32];
        int len = u2s((unsigned long long)a.now, member);
        uint64_t r = rng();
        member[len++] = ':';
        for (int j = 0; j < 8; j++) member[len++] = "0123456789abcdef"[(r >> (4 * j)) & 15];
        RedisModuleString *m = RedisModule_CreateString(ctx, member, (size_t)len);
        int flags = REDISMODULE_ZADD_NX;
        RedisModule_ZsetAdd(k, (double)a.now, m, &flags);
        RedisModule_Replicate(ctx, "ZADD", "sls", name, a.now, m);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_ZSET, "zadd", name);
        RedisModule_FreeString(ctx, m);
        total++;
        if (newest < a.now) newest = a.now;
    }
    if (RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY) {
        long long at = wall_ms() + a.window_us / 1000;
        RedisModule_SetAbsExpire(k, at);
        RedisModule_Replicate(ctx, "PEXPIREAT", "sl", name, at);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", name);
    }
    if (allowed || removed || t != REDISMODULE_KEYTYPE_EMPTY) RedisModule_SignalModifiedKey(ctx, name);
    RedisModule_CloseKey(k);
    long long gone = newest < 0 ? 0 : (newest + a.window_us - a.now + 999) / 1000;
    reply4(ctx, allowed, a.limit > total ? a.limit - total : 0,
           allowed ? 0 : (oldest < 0 ? -1 : (oldest + a.window_us - a.now + 999) / 1000), gone);
    return REDISMODULE_OK;
}

/* What a user cache's invalidation would have to see: any command that can change
 * a user's permissions or a client's user. */
static unsigned long long acl_generation;

static void AclFilter(RedisModuleCommandFilterCtx *f) {
    size_t len;
    const char *name = RedisModule_StringPtrLen(RedisModule_CommandFilterArgGet(f, 0), &len);
    if ((len == 3 && strncasecmp(name, "ACL", 3) == 0) ||
        (len == 4 && strncasecmp(name, "AUTH", 4) == 0) ||
        (len == 5 && (strncasecmp(name, "HELLO", 5) == 0 || strncasecmp(name, "RESET", 5) == 0)))
        acl_generation++;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    for (int i = 0; i < argc; i++) {
        size_t len;
        const char *arg = RedisModule_StringPtrLen(argv[i], &len);
        if (len == 14 && memcmp(arg, "integer-values", 14) == 0) integers = 1;
        if (len == 10 && memcmp(arg, "acl-filter", 10) == 0 &&
            !RedisModule_RegisterCommandFilter(ctx, AclFilter, 0))
            return REDISMODULE_ERR;
    }
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED);
    ONE = RedisModule_CreateString(NULL, "1", 1);
    NEGINF = RedisModule_CreateString(NULL, "-inf", 4);
    PXAT = RedisModule_CreateString(NULL, "PXAT", 4);
    RedisModule_GetRandomBytes((unsigned char *)&rng_state, sizeof(rng_state));
    struct { const char *name; RedisModuleCmdFunc f; } cmds[] = {
        {"floor.fixed", FixedCommand},
        {"floor.slidecount", SlideCountCommand},
        {"floor.gcra", GcraCommand},
        {"floor.slidelog", SlideLogCommand},
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (RedisModule_CreateCommand(ctx, cmds[i].name, cmds[i].f, "write fast", 1, 1, 1) ==
            REDISMODULE_ERR)
            return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
