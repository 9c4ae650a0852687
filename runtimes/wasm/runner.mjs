// The Deno side of the pyodide runtime: one process runs Pyodide for one execution (or
// builds the memory snapshot once). The host (runtimes/wasm/deno.py) starts it with read
// permission on the Pyodide distribution, the snapshot and the wheel directories only:
// no network, environment, writes, subprocesses, FFI or system information.
//
// stdin, line 1 (the host's set-up, never in argv): {"mode": "serve" | "build", "token",
// "index_url" (a directory path), "module_url", "snapshot", "wheels", "imports", "mounts",
// "modules", "preload"}.
//
// "build": load Pyodide with the snapshot flag, install our Python modules (the CPython
// runner and guest.py) and import them and the usual standard library, then write
// `TOKEN {"type": "snapshot", "size": N}` and the N bytes of the snapshot on stdout.
//
// "serve": load Pyodide from the snapshot, load the execution's wheels, capture what this
// file needs of `Deno` (stdin, stdout, stderr, exit) and delete the global, then write
// `TOKEN {"type": "warm"}` and wait. The next line is the bootstrap (the same JSON as the
// CPython runner's, runtimes/runner/bootstrap.py); guest.py runs the code and talks to the
// host in the runner protocol (runtimes/transports/protocol.py). Every line this file
// writes on stdout starts with the per-process token; the host drops any line that does
// not, so code that reaches stdout (console.log, node:process) cannot forge a message.
// What the code prints goes to stderr, which the host drains with a byte cap.
//
// Tool calls: for a sync tool guest.py sends the call and gets a promise the host's answer
// resolves, which it waits for with pyodide.ffi.run_sync (JSPI). Answers to async calls go
// to guest.py's receiver, every answer that arrived meanwhile in one call, in a task of
// their own (an async tool awaits an asyncio future the receiver sets). When
// the code has nothing left to run while async calls are outstanding, this file tells the
// host `blocked` (the CPython runner's event loop does the same from its selector).

const stdin = Deno.stdin;
const stdout = Deno.stdout;
const stderr = Deno.stderr;
const exit = Deno.exit;
const readFile = Deno.readFile;
const encoder = new TextEncoder();

function writeAll(resource, bytes) {
  let offset = 0;
  while (offset < bytes.length) offset += resource.writeSync(bytes.subarray(offset));
}

function writeErr(text) {
  try {
    writeAll(stderr, encoder.encode(text.endsWith("\n") ? text : text + "\n"));
  } catch {
    // stderr closed: nothing to tell
  }
}

// Nothing but protocol lines on stdout: the console (Pyodide's own messages, or code
// calling js.console.log) writes to stderr, the code's output.
for (const name of ["log", "info", "warn", "error", "debug", "trace"]) {
  console[name] = (...args) => writeErr(args.map((a) => (typeof a === "string" ? a : String(a))).join(" "));
}

// Pyodide runs its event loop's callbacks with setImmediate (Deno passes for Node) or
// setTimeout(fn, 0), which Deno clamps to 4 ms once timers nest. Both go through one queue
// here, a task per message-channel hop, so that we know when the code has nothing left to
// run (see `afterTask`).
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const immediate = new Map(); // id -> callback, until it runs or is cleared
const order = []; // ids in the order they were scheduled
let head = 0;
let nextImmediate = -1;
const channel = new MessageChannel();
const RUN = 0;
const CHECK = 1;
channel.port1.onmessage = (event) => {
  if (event.data === CHECK) return afterTask();
  while (head < order.length) {
    const id = order[head++];
    const fn = immediate.get(id);
    if (fn === undefined) continue; // cleared
    immediate.delete(id);
    try {
      fn();
    } catch (err) {
      writeErr(`codemode runner: a scheduled callback failed: ${err?.stack ?? err}`);
    }
    break;
  }
  if (head > 1024 && head * 2 > order.length) {
    order.splice(0, head);
    head = 0;
  }
  // What the callback started goes on in microtasks (Pyodide resumes Python there): look
  // whether the code is idle in a task of its own, after them.
  if (immediate.size === 0) channel.port2.postMessage(CHECK);
};
function schedule(fn, args) {
  const id = nextImmediate--;
  immediate.set(id, () => fn(...args));
  order.push(id);
  channel.port2.postMessage(RUN);
  return id;
}
globalThis.setImmediate = (fn, ...args) => schedule(fn, args);
globalThis.clearImmediate = (id) => immediate.delete(id);
globalThis.setTimeout = (fn, delay, ...args) =>
  typeof fn !== "function" || (delay ?? 0) > 0 ? realSetTimeout(fn, delay, ...args) : schedule(fn, args);
globalThis.clearTimeout = (id) => {
  if (typeof id === "number" && id < 0) immediate.delete(id);
  else realClearTimeout(id);
};

// -- compute clock --------------------------------------------------------------------------

// The code's compute time, paused while it waits for the host (a sync call, or idle with
// async calls outstanding), as the host counts it. At the limit a timer thread sets
// Pyodide's interrupt buffer: Python raises (guest.py turns SIGINT into the runner's
// timeout) on the line it was running. The host kills the process a grace period later if
// the code swallowed that.
const clock = {
  interrupt: new Int32Array(new SharedArrayBuffer(4)),
  timer: null,
  budget: 0,
  since: null,
  prepare() {
    // The thread starts while the process waits for its code, not on the execution's path.
    this.timer = new Worker(
      "data:text/javascript," +
        encodeURIComponent(
          "let t; onmessage = (e) => { clearTimeout(t); const [buf, ms] = e.data;" +
            " if (ms !== null) t = setTimeout(() => Atomics.store(buf, 0, 2), ms); };",
        ),
      { type: "module" },
    );
  },
  start(seconds) {
    this.budget = seconds * 1000;
  },
  resume() {
    if (this.timer === null || this.since !== null) return;
    this.since = performance.now();
    this.timer.postMessage([this.interrupt, Math.max(0, this.budget)]);
  },
  pause() {
    if (this.timer === null || this.since === null) return;
    this.budget -= performance.now() - this.since;
    this.since = null;
    this.timer.postMessage([this.interrupt, null]);
  },
};

// -- protocol -----------------------------------------------------------------------------

let token = "";

function sendLine(json) {
  // A line break inside would start a line without the token: re-encode it.
  if (json.includes("\n") || json.includes("\r")) json = JSON.stringify(JSON.parse(json));
  writeAll(stdout, encoder.encode(`${token} ${json}\n`));
}

async function* stdinLines() {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stdin.readable) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.trim()) yield line;
    }
  }
}

const pending = new Map(); // call_id -> {resolve, concurrent}
let receiver = null; // guest.py's: answers to async calls, newline-separated
let answered = []; // those answers, until the scheduled task hands them over

function handOver() {
  const lines = answered.join("\n");
  answered = [];
  receiver(lines);
}
let syncCalls = 0;
let running = false;
let reported = "";

function afterTask() {
  // The code has nothing to run: if async calls are outstanding it waits for the host.
  if (!running || immediate.size > 0 || syncCalls > 0) return;
  const waiting = [...pending].filter(([, p]) => p.concurrent).map(([id]) => id);
  const key = waiting.join(",");
  if (waiting.length > 0 && key !== reported) {
    reported = key;
    sendLine(JSON.stringify({ type: "blocked", waiting }));
    clock.pause();
  }
}

const host = {
  send(json) {
    sendLine(json);
  },
  receive(fn) {
    receiver = fn;
  },
  call(callId, json) {
    return new Promise((resolve) => {
      pending.set(String(callId), { resolve, concurrent: false });
      syncCalls += 1;
      clock.pause();
      sendLine(json);
    });
  },
  call_async(callId, json) {
    pending.set(String(callId), { resolve: null, concurrent: true });
    sendLine(json);
  },
};

function deliver(line) {
  let answer;
  try {
    answer = JSON.parse(line);
  } catch {
    return;
  }
  if (answer?.type !== "answer") return;
  const id = String(answer.call_id);
  const call = pending.get(id);
  if (call === undefined) return;
  pending.delete(id);
  reported = "";
  clock.resume();
  if (call.concurrent) {
    if (answered.push(line) === 1) schedule(handOver, []);
  } else {
    syncCalls -= 1;
    call.resolve(line);
  }
  // The code resumes in microtasks: a task after them checks whether it is idle again.
  channel.port2.postMessage(CHECK);
}

// -- start ----------------------------------------------------------------------------------

const lines = stdinLines();
const first = await lines.next();
if (first.done) exit(70);
const setup = JSON.parse(first.value);
token = setup.token;

const { loadPyodide } = await import(setup.module_url);

if (setup.mode === "build") {
  const pyodide = await loadPyodide({
    indexURL: setup.index_url,
    _makeSnapshot: true,
    // A fixed hash seed: every process started from this snapshot, on any machine, orders
    // a set of strings the same way, so a journal replay makes the same calls.
    env: { PYTHONHASHSEED: "0", HOME: "/home/pyodide" },
  });
  pyodide.FS.mkdirTree("/codemode");
  for (const [path, source] of Object.entries(setup.modules)) {
    pyodide.FS.mkdirTree(`/codemode/${path}`.split("/").slice(0, -1).join("/"));
    pyodide.FS.writeFile(`/codemode/${path}`, source);
  }
  pyodide.runPython(`import sys\nsys.path.insert(0, "/codemode")\nimport codemode_guest`);
  // Preloaded (pure-Python) wheels are unpacked by Python itself: what loadPackage leaves
  // behind in JavaScript cannot be snapshotted.
  const copies = [];
  for (const [i, path] of setup.wheels.entries()) {
    const copy = `/tmp/preload-${i}-${path.split("/").pop()}`;
    pyodide.FS.writeFile(copy, await readFile(path));
    copies.push(copy);
  }
  const guest = pyodide.pyimport("codemode_guest");
  guest.preload(JSON.stringify(copies), JSON.stringify(setup.preload));
  guest.destroy();
  const snapshot = pyodide.makeMemorySnapshot();
  sendLine(JSON.stringify({ type: "snapshot", size: snapshot.length }));
  writeAll(stdout, snapshot);
  exit(0);
}

const pyodide = await loadPyodide({
  indexURL: setup.index_url,
  _loadSnapshot: await readFile(setup.snapshot),
  stdout: writeErr,
  stderr: writeErr,
});
const raw = { write: (bytes) => (writeAll(stderr, bytes), bytes.length), isatty: false };
pyodide.setStdout(raw);
pyodide.setStderr(raw);
pyodide.setStdin({ stdin: () => null });
// Read-only mounts: the host directory (or file) is copied into the in-memory filesystem
// and made read-only there (Pyodide's NODEFS would pass writes to Deno, which refuses them
// by ending the process). Capped, so a huge directory is an error, not a full memory.
const MOUNT_BYTES = 256 * 1024 * 1024;
let mounted = 0;
async function copyIn(src, dst) {
  const info = await Deno.stat(src);
  if (info.isDirectory) {
    pyodide.FS.mkdirTree(dst);
    for await (const entry of Deno.readDir(src)) await copyIn(`${src}/${entry.name}`, `${dst}/${entry.name}`);
    pyodide.FS.chmod(dst, 0o555);
  } else if (info.isFile) {
    mounted += info.size;
    if (mounted > MOUNT_BYTES) throw new Error(`the mounts hold more than ${MOUNT_BYTES} bytes`);
    pyodide.FS.writeFile(dst, await readFile(src));
    pyodide.FS.chmod(dst, 0o444);
  }
}
for (const [src, dst] of setup.mounts ?? []) {
  pyodide.FS.mkdirTree(dst.split("/").slice(0, -1).join("/") || "/");
  await copyIn(src, dst);
}
// Files of the snapshot's preloaded wheels are not in it (only their imported modules):
// extract them again, then the execution's own packages.
if (setup.wheels.length > 0) {
  await pyodide.loadPackage(setup.wheels, { messageCallback: () => {}, errorCallback: writeErr });
}
const guest = pyodide.pyimport("codemode_guest");
guest.warm(JSON.stringify(setup.imports ?? []));
// Run an execution's paths once against a host that answers at once (see guest.prime).
const echoed = (callId) => JSON.stringify({ type: "answer", call_id: callId, ok: true, value: 1 });
const echo = {
  send() {},
  receive(fn) {
    echo.receiver = fn;
  },
  call: (callId) => Promise.resolve(echoed(callId)),
  call_async(callId) {
    schedule(() => echo.receiver(echoed(callId)), []);
  },
};
await guest.prime.callPromising(echo);

clock.prepare();

// From here on the code could run: nothing of Deno stays reachable from it.
delete globalThis.Deno;
sendLine(JSON.stringify({ type: "warm" }));

const boot = await lines.next();
if (boot.done) exit(0);
(async () => {
  for await (const line of lines) deliver(line);
  exit(70); // the host went away
})();
pyodide.setInterruptBuffer(clock.interrupt);
clock.start(JSON.parse(boot.value)?.limits?.timeout_seconds ?? 30);
running = true;
clock.resume();
let final;
try {
  final = await guest.run(boot.value, host);
} catch (err) {
  writeErr(`codemode runner: ${err?.stack ?? err}`);
  exit(1);
}
running = false;
sendLine(final);
exit(0);
