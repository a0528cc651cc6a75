// Package audit writes and reads the core's audit log: JSON Lines at
// $CARAPACE_HOME/logs/audit.jsonl, one entry per event that crosses the trust
// boundary. Arguments and results are never logged. The log is the system's
// only detective control, so the writer fails closed.
//
// # Writing
//
// A Log appends each Entry as one line in a single write(2) to a file opened
// with O_APPEND (0600, in a 0700 directory). JSON escapes every control
// character, so no field — a Reason quoting hostile text, say — can end a
// line early and forge an entry after it.
//
// Write returns nil only when the whole line is in the file. Otherwise — the
// disk is full, the file cannot be reopened, rotation failed, the write was
// short, the log is closed — it returns an error and the core refuses the
// request instead of running it unaudited. A write that failed half way
// leaves a fragment; the next entry starts on a new line so that only the
// fragment is lost, and Read counts it as malformed.
//
// # Durability
//
// An entry whose Write returned nil is in the kernel's page cache, so it
// survives a crash of the process (including SIGKILL). Entries are not
// fsynced one by one — the core writes tens of thousands a second — but by a
// background goroutine every Options.SyncInterval (1 s by default), which
// also fsyncs rotated files and the directory after a rotation. A power loss
// or kernel crash can therefore lose up to SyncInterval of entries, or more
// if background fsync is disabled. A failed background fsync is logged; no
// later Write reports it.
//
// # Rotation
//
// When a write would take the file past Options.MaxBytes the log rotates:
// audit.jsonl.(N-1) becomes audit.jsonl.N, …, audit.jsonl becomes
// audit.jsonl.1, and a fresh audit.jsonl is created; the oldest file beyond
// Options.MaxFiles is dropped. Read and Follow know these names and read the
// files oldest first.
//
// Rotation is written here rather than taken from the usual library,
// gopkg.in/natefinch/lumberjack.v2 (as of v2.2.1), for its behaviour when
// things go wrong and for its file names. Its backups are named by rotation
// time to the millisecond, which a reader must parse to order, and a second
// rotation within the same millisecond renames onto the first backup,
// replacing it. If it cannot open the existing file it silently starts a new
// one; it opens the new file with O_TRUNC, wiping whatever is there; it
// creates directories 0755 and keeps an old file's mode however wide; its
// cleanup goroutine drops its errors. Its Write does return errors, but as
// the io.Writer behind a logger — its intended use — they stop at the
// logger: the code serving the request never learns its entry was lost. Here
// the caller writes entries, not bytes, a failed rotation fails the Write
// that needed it, and the next Write retries.
//
// # Reading
//
// Read and Follow work whether or not a core is writing: they take no lock,
// open the files read-only and skip malformed lines instead of failing.
package audit
