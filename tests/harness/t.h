/* The test framework: TEST() registers a case; each case runs in its own forked process group,
 * so a crash, a hang or a leaked child process ends that case only. A test binary prints one
 * line per case and `N passed, N failed` last; its first argument filters cases by substring of
 * "binary.case". */
#ifndef GWB_T_H
#define GWB_T_H

#include <setjmp.h>
#include <stdint.h>
#include <string.h>

struct t_case {
	const char *name;
	void (*fn)(void);
	int timeout_s;
	struct t_case *next;
};

void t_register(struct t_case *c);
/* Records a failure at file:line and ends the current case. */
__attribute__((noreturn, format(printf, 3, 4))) void t_fail(const char *file, int line,
							     const char *fmt, ...);
/* Records a failure without ending the case (for clean-up code). */
__attribute__((format(printf, 1, 2))) void t_fail_soft(const char *fmt, ...);
/* Prints a note under the current case (shown always). */
__attribute__((format(printf, 1, 2))) void t_log(const char *fmt, ...);
/* Registers a function run when the case ends, pass or fail (in reverse order). */
void t_defer(void (*fn)(void *), void *arg);

/* Runner internals shared by t.c and t_main.c; tests do not use them. */
extern struct t_case *t_cases_;
extern jmp_buf t_case_jmp_;
extern int t_soft_failed_;
void t_run_defers_(void);

#define TEST_T(fn, secs)                                                    \
	static void fn(void);                                               \
	static struct t_case t_case_##fn = { #fn, fn, secs, 0 };            \
	__attribute__((constructor)) static void t_reg_##fn(void)           \
	{                                                                   \
		t_register(&t_case_##fn);                                   \
	}                                                                   \
	static void fn(void)
/* A case with the default time limit (120 s). */
#define TEST(fn) TEST_T(fn, 120)

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond))                                              \
			t_fail(__FILE__, __LINE__, "check failed: %s", #cond); \
	} while (0)
#define CHECKF(cond, ...)                                        \
	do {                                                     \
		if (!(cond))                                     \
			t_fail(__FILE__, __LINE__, __VA_ARGS__); \
	} while (0)
#define CHECK_INT(a, b)                                                                    \
	do {                                                                               \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);                    \
		if (t_a_ != t_b_)                                                          \
			t_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, \
			       t_a_, #b, t_b_);                                            \
	} while (0)
#define CHECK_STR(a, b)                                                                    \
	do {                                                                               \
		const char *t_a_ = (a), *t_b_ = (b);                                       \
		if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_) != 0)                             \
			t_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"", #a,    \
			       t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)");            \
	} while (0)

#endif
