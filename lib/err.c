/* Names and messages for the error table in err.h. */
#include "lib/err.h"

const char *err_name(int err)
{
	switch (err) {
	case GWB_OK:
		return "GWB_OK";
#define GWB_ERR_NAME(name, str) \
	case GWB_E##name:       \
		return "GWB_E" #name;
		GWB_ERR_TABLE(GWB_ERR_NAME)
#undef GWB_ERR_NAME
	default:
		return "GWB_UNKNOWN";
	}
}

const char *err_str(int err)
{
	switch (err) {
	case GWB_OK:
		return "success";
#define GWB_ERR_STR(name, str) \
	case GWB_E##name:      \
		return str;
		GWB_ERR_TABLE(GWB_ERR_STR)
#undef GWB_ERR_STR
	default:
		return "unknown error";
	}
}
