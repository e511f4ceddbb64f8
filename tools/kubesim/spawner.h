/* Container starts off the event loop: one thread runs posix_spawn for the kubelet, so the
 * loop never waits for a child to reach its exec (on a busy machine that wait is the child's
 * turn on a CPU, milliseconds each). The loop hands a start over with its own copies of the
 * arguments and hears of its pid, or the exec error, from a pipe event. */
#ifndef KUBESIM_SPAWNER_H
#define KUBESIM_SPAWNER_H

#include <event2/event.h>
#include <stdint.h>
#include <sys/types.h>

struct spawner;

/* A start ended: pid of the child (> 0), or -1 with err the errno of the failed exec (or of
 * what came before it); started_ms the wall clock when posix_spawn returned. tag is the
 * submitter's. Runs on the loop (or inside spawner_free, see there). */
typedef void (*spawner_done_fn)(void *tag, pid_t pid, int err, int64_t started_ms, void *arg);

/* Starts the thread and the pipe event on base. Returns the spawner, or NULL when the thread
 * or the pipe cannot be had (the caller then starts its containers with spawner_run). fn
 * fires once per submitted start, always later, never from inside spawner_submit. */
struct spawner *spawner_new(struct event_base *base, spawner_done_fn fn, void *arg);
/* Stops the thread. Starts already run but not yet reported are reported through fn before
 * this returns (so the caller learns their pids); starts not yet run are reported with pid
 * -1 and err ECANCELED. Accepts NULL. */
void spawner_free(struct spawner *s);

/* Queues one start: argv[0] is the program's path, argv and envp NULL-terminated, dir the
 * working folder, log the file that gets stdout and stderr, nice the child's CPU weight (see
 * spawner_run). Everything is copied. */
void spawner_submit(struct spawner *s, void *tag, const char *dir, const char *log,
		    char *const *argv, char *const *envp, int nice);

/* The start itself, on the caller's thread: posix_spawn (glibc clones with CLONE_VM |
 * CLONE_VFORK, so no page tables are copied, and reports a failed exec as its return value,
 * having reaped that child). The child gets its own session (kill(-pid) reaches its group),
 * every signal at its default and none blocked, log on stdout and stderr, /dev/null on
 * stdin, no other descriptor, and dir as its working folder. A log that cannot be opened or
 * a folder that cannot be entered does not stop the start: the child keeps kubesim's
 * descriptor or folder instead. nice (0 to 19) is the child's CPU weight, set on the child
 * and on its session's scheduling group (Linux's autogroup, where there is one: a session of
 * its own would otherwise weigh as much as kubesim's whole session). A weight that cannot be
 * set does not stop the start either. Returns the pid, or -1 with *err the errno. */
pid_t spawner_run(const char *dir, const char *log, char *const *argv, char *const *envp,
		  int nice, int *err);

/* The nice value (0 to 19) whose CPU weight is closest to the cpu.shares a kubelet gives a
 * container requesting milli_cpu milli-cores (shares = milli-cores x 1024 / 1000, at least 2;
 * 0 for no request). Weights below nice 0's are not given: raising one needs privileges. */
int spawner_nice_for_cpu(int64_t milli_cpu);

#endif
