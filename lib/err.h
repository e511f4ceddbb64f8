/* The project's error codes: 0 is success, every failure a negative value from one table. */
#ifndef GWB_ERR_H
#define GWB_ERR_H

#define GWB_ERR_TABLE(X)                                            \
	X(NOMEM, "out of memory")                                   \
	X(INVAL, "invalid argument")                                \
	X(IO, "input/output error")                                 \
	X(DB, "database error")                                     \
	X(BUSY, "resource busy")                                    \
	X(NOTFOUND, "not found")                                    \
	X(EXISTS, "already exists")                                 \
	X(QUOTA, "quota exceeded")                                  \
	X(CONFLICT, "conflict")                                     \
	X(FORBIDDEN, "forbidden")                                   \
	X(TIMEOUT, "timed out")                                     \
	X(PROTO, "protocol error")                                  \
	X(TOOBIG, "too large")                                      \
	X(UNAVAIL, "service unavailable")                           \
	X(STATE, "invalid state")

enum gwb_err {
	GWB_OK = 0,
#define GWB_ERR_ENUM(name, str) GWB_E##name,
	GWB_ERR_BASE_ = -1000,
	GWB_ERR_TABLE(GWB_ERR_ENUM)
#undef GWB_ERR_ENUM
	GWB_ERR_END_
};

/* Short symbolic name ("GWB_ENOTFOUND"), or "GWB_UNKNOWN" for a value outside the table. */
const char *err_name(int err);
/* Human sentence for the error. Never NULL. */
const char *err_str(int err);

#endif
