/*
 * cluster_lua.c -- the Lua scripts that make each step of the shared
 * queue one atomic step in Redis (EVAL runs a script with nothing else in
 * between).  Redis caches a script by its SHA1 after its first EVAL.
 *
 * A task's state in its hash is a number, as in the store: 0 queued,
 * 1 running, 2 completed, 3 failed, 4 cancelled; 2 and above are final,
 * and no script changes a final state: the first result written stands
 * (a node whose lease expired and that comes back late loses, and is told
 * which result stood).
 */
#include "config.h"

#include "cluster.h"

/*
 * Take up to `room` entries for this node: first (when asked) entries of
 * any node idle past the lease (XAUTOCLAIM, from each stream's cursor),
 * then new ones, high priority first.  Each take counts an attempt; past
 * max_attempts the task fails here with SYSTEM_ERROR.  Entries of tasks
 * already final (cancelled while queued) are acknowledged and dropped.
 * a: group, node, room, now_ms, max_attempts, ttl_s, reclaim (0|1),
 * lease_ms, cursor of stream 0, 1, 2.
 * Returns {{id, entry, prio, attempt, owner, workflow, timeout_s, gmem,
 * created_ms, payload, seq}...}, {cursors}.
 */
#define CLUSTER_LUA_CLAIM_FN \
"local function claim(a)\n" \
"local out = {}\n" \
"local room = tonumber(a[3])\n" \
"local cursors = {a[9], a[10], a[11]}\n" \
"local function drop(q, entry)\n" \
"  redis.call('XACK', q, a[1], entry)\n" \
"  redis.call('XDEL', q, entry)\n" \
"end\n" \
"local function take(p, entry, id)\n" \
"  local q = 'kgym:q:' .. p\n" \
"  local key = 'kgym:t:' .. id\n" \
"  local h = redis.call('HMGET', key, 'state', 'attempt')\n" \
"  if not h[1] or tonumber(h[1]) >= 2 then drop(q, entry) return end\n" \
"  local attempt = tonumber(h[2]) + 1\n" \
"  if attempt > tonumber(a[5]) then\n" \
"    local msg = 'the task was claimed ' .. (attempt - 1) .. ' times (cluster max_attempts) ' ..\n" \
"      'and no node finished it: its nodes died or lost their lease'\n" \
"    local res = cjson.encode({task_id = id, status = 'failed', compiled = false,\n" \
"      correctness = false, decoy_kernel = false, error_code = 'SYSTEM_ERROR',\n" \
"      error_message = msg, kernel_runtime = cjson.null, reference_runtime = cjson.null,\n" \
"      speedup = cjson.null})\n" \
"    redis.call('HSET', key, 'state', 3, 'error_code', 'SYSTEM_ERROR', 'error_message', msg,\n" \
"      'result', res, 'finished_ms', a[4], 'winner', a[2])\n" \
"    redis.call('HDEL', key, 'payload')\n" \
"    redis.call('EXPIRE', key, a[6])\n" \
"    drop(q, entry)\n" \
"    redis.call('PUBLISH', 'kgym:done', id)\n" \
"    return\n" \
"  end\n" \
"  redis.call('HSET', key, 'state', 1, 'attempt', attempt, 'node', a[2], 'started_ms', a[4])\n" \
"  local t = redis.call('HMGET', key, 'owner', 'workflow', 'timeout_s', 'gmem',\n" \
"    'created_ms', 'payload', 'seq')\n" \
"  out[#out + 1] = {id, entry, p, attempt, t[1], t[2], t[3], t[4], t[5], t[6], t[7]}\n" \
"  room = room - 1\n" \
"end\n" \
"if a[7] == '1' then\n" \
"  for p = 0, 2 do\n" \
"    if room <= 0 then break end\n" \
"    local r = redis.call('XAUTOCLAIM', 'kgym:q:' .. p, a[1], a[2], a[8],\n" \
"      cursors[p + 1], 'COUNT', room)\n" \
"    cursors[p + 1] = r[1]\n" \
"    for _, e in ipairs(r[2]) do\n" \
"      if e[2] then take(p, e[1], e[2][2]) end\n" \
"    end\n" \
"  end\n" \
"end\n" \
"for p = 0, 2 do\n" \
"  if room <= 0 then break end\n" \
"  local r = redis.call('XREADGROUP', 'GROUP', a[1], a[2], 'COUNT', room,\n" \
"    'STREAMS', 'kgym:q:' .. p, '>')\n" \
"  if r then\n" \
"    for _, e in ipairs(r[1][2]) do take(p, e[1], e[2][2]) end\n" \
"  end\n" \
"end\n" \
"return {out, cursors}\n" \
"end\n"

/* ARGV: the claim's arguments, as above. */
const char cluster_lua_claim[] = CLUSTER_LUA_CLAIM_FN "return claim(ARGV)\n";

/*
 * ARGV: now_ms, origin node, n, then the claim's 11 arguments (room 0: no
 * claim), then n times: id, prio, owner, workflow, timeout_s,
 * gpu_memory_bytes, created_ms, payload.  Returns per task {1, state,
 * owner} when the id exists (that task stands), else {0, seq}; then what
 * the submitting node claimed at once (a claim's reply, or {}): the
 * wake-up round trip saved when it has room.  Tasks added: one message on
 * kgym:wake for the others.
 */
const char cluster_lua_submit[] = CLUSTER_LUA_CLAIM_FN
"local out = {}\n"
"local added = 0\n"
"for i = 0, tonumber(ARGV[3]) - 1 do\n"
"  local b = 15 + i * 8\n"
"  local id = ARGV[b]\n"
"  local key = 'kgym:t:' .. id\n"
"  local h = redis.call('HMGET', key, 'state', 'owner')\n"
"  if h[1] then\n"
"    out[#out + 1] = {1, tonumber(h[1]), h[2] or ''}\n"
"  else\n"
"    local seq = redis.call('INCR', 'kgym:seq')\n"
"    local entry = redis.call('XADD', 'kgym:q:' .. ARGV[b + 1], '*', 'id', id)\n"
"    redis.call('HSET', key, 'state', 0, 'prio', ARGV[b + 1], 'owner', ARGV[b + 2],\n"
"      'workflow', ARGV[b + 3], 'timeout_s', ARGV[b + 4], 'gmem', ARGV[b + 5],\n"
"      'created_ms', ARGV[b + 6], 'payload', ARGV[b + 7], 'seq', seq, 'attempt', 0,\n"
"      'origin', ARGV[2], 'entry', entry)\n"
"    redis.call('ZADD', 'kgym:idx', seq, id)\n"
"    redis.call('ZADD', 'kgym:idx:' .. ARGV[b + 2], seq, id)\n"
"    out[#out + 1] = {0, seq}\n"
"    added = added + 1\n"
"  end\n"
"end\n"
"local c = {}\n"
"if tonumber(ARGV[6]) > 0 and added > 0 then\n"
"  c = claim({ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11],\n"
"    ARGV[12], ARGV[13], ARGV[14]})\n"
"end\n"
"if added > #(c[1] or {}) then redis.call('PUBLISH', 'kgym:wake', added) end\n"
"return {out, c}\n";

/*
 * The heartbeat: this node's line in kgym:nodes, and its claims renewed
 * (XCLAIM ... 0 JUSTID resets an entry's idle time without counting a
 * delivery) while they are still this node's.  ARGV: group, node, node
 * JSON, then (prio, entry, id) per task.  Returns the ids that ended
 * elsewhere (cancelled, or another node's result stands), then the ids
 * whose entry another node holds now (our lease expired).
 */
const char cluster_lua_renew[] =
"local ended, taken = {}, {}\n"
"redis.call('HSET', 'kgym:nodes', ARGV[2], ARGV[3])\n"
"for i = 4, #ARGV, 3 do\n"
"  local q = 'kgym:q:' .. ARGV[i]\n"
"  local st = redis.call('HGET', 'kgym:t:' .. ARGV[i + 2], 'state')\n"
"  if not st or tonumber(st) >= 2 then\n"
"    ended[#ended + 1] = ARGV[i + 2]\n"
"  else\n"
"    local p = redis.call('XPENDING', q, ARGV[1], ARGV[i + 1], ARGV[i + 1], 1)\n"
"    if p[1] and p[1][2] == ARGV[2] then\n"
"      redis.call('XCLAIM', q, ARGV[1], ARGV[2], 0, ARGV[i + 1], 'JUSTID')\n"
"    else\n"
"      taken[#taken + 1] = ARGV[i + 2]\n"
"    end\n"
"  end\n"
"end\n"
"return {ended, taken}\n";

/*
 * Write results, each only if its task is not final yet, then acknowledge
 * and delete its entry, set the TTL, and say so on kgym:done.  ARGV:
 * group, node, ttl_s, now_ms, then (id, state, error_code, error_message,
 * result) per task.  Per task: {1} written; {0, state, result, winner}
 * another result stands; {-1} no such task (expired).
 */
const char cluster_lua_finish[] =
"local out = {}\n"
"for i = 5, #ARGV, 5 do\n"
"  local id = ARGV[i]\n"
"  local key = 'kgym:t:' .. id\n"
"  local h = redis.call('HMGET', key, 'state', 'prio', 'entry')\n"
"  if not h[1] then\n"
"    out[#out + 1] = {-1}\n"
"  elseif tonumber(h[1]) >= 2 then\n"
"    local r = redis.call('HMGET', key, 'state', 'result', 'winner')\n"
"    out[#out + 1] = {0, tonumber(r[1]), r[2] or '', r[3] or ''}\n"
"  else\n"
"    redis.call('HSET', key, 'state', ARGV[i + 1], 'error_code', ARGV[i + 2],\n"
"      'error_message', ARGV[i + 3], 'result', ARGV[i + 4], 'finished_ms', ARGV[4],\n"
"      'winner', ARGV[2])\n"
"    redis.call('HDEL', key, 'payload')\n"
"    redis.call('EXPIRE', key, ARGV[3])\n"
"    local q = 'kgym:q:' .. h[2]\n"
"    redis.call('XACK', q, ARGV[1], h[3])\n"
"    redis.call('XDEL', q, h[3])\n"
"    redis.call('PUBLISH', 'kgym:done', id)\n"
"    out[#out + 1] = {1}\n"
"  end\n"
"end\n"
"return out\n";

/*
 * A page of tasks, newest first: ARGV: owner ('' all), state (-1 all),
 * before seq (0: none), limit.  Walks at most 10,000 index entries per
 * page; ids whose task expired leave the index on the way.
 * Returns {id, seq, state, owner, workflow, prio, attempt, created_ms,
 * started_ms, finished_ms, error_code} per task.
 */
const char cluster_lua_list[] =
"local idx = ARGV[1] == '' and 'kgym:idx' or ('kgym:idx:' .. ARGV[1])\n"
"local cursor = tonumber(ARGV[3]) > 0 and ('(' .. ARGV[3]) or '+inf'\n"
"local want, limit = tonumber(ARGV[2]), tonumber(ARGV[4])\n"
"local out, scanned = {}, 0\n"
"while #out < limit and scanned < 10000 do\n"
"  local ids = redis.call('ZREVRANGEBYSCORE', idx, cursor, '-inf', 'WITHSCORES',\n"
"    'LIMIT', 0, 200)\n"
"  if #ids == 0 then break end\n"
"  for j = 1, #ids, 2 do\n"
"    local id, seq = ids[j], ids[j + 1]\n"
"    cursor = '(' .. seq\n"
"    scanned = scanned + 1\n"
"    local h = redis.call('HMGET', 'kgym:t:' .. id, 'state', 'owner', 'workflow', 'prio',\n"
"      'attempt', 'created_ms', 'started_ms', 'finished_ms', 'error_code')\n"
"    if not h[1] then\n"
"      redis.call('ZREM', idx, id)\n"
"    elseif want < 0 or tonumber(h[1]) == want then\n"
"      out[#out + 1] = {id, seq, h[1], h[2] or '', h[3] or '', h[4] or '1', h[5] or '0',\n"
"        h[6] or '0', h[7] or '0', h[8] or '0', h[9] or ''}\n"
"      if #out >= limit then break end\n"
"    end\n"
"  end\n"
"end\n"
"return out\n";
