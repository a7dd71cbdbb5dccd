/*
 * pn_common.h
 *	  What the shim's programs (cgi/, send/, relay/) share: a growable byte
 *	  buffer, UTF-8 checking and JSON string escaping, one-line logging
 *	  to stderr, the monotonic clock and the stop signals.  Plain C11 and
 *	  libc only, so every program can link it.
 *
 * Allocation failure is reported, never fatal: a buffer that failed to grow
 * stays failed (its contents are then incomplete) and every later append
 * returns false.  A program that has no fallback checks the flag itself.
 */
#ifndef PAYNOTIFY_SHIM_COMMON_H
#define PAYNOTIFY_SHIM_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* A growable byte buffer, NUL-terminated once anything was appended. */
typedef struct pn_buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} pn_buf;

/* pn_buf.c */
extern void pn_buf_init(pn_buf *b);
extern bool pn_buf_reserve(pn_buf *b, size_t extra);
extern bool pn_buf_append(pn_buf *b, const void *data, size_t n);
extern bool pn_buf_appendf(pn_buf *b, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
extern bool pn_buf_vappendf(pn_buf *b, const char *fmt, va_list ap)
			__attribute__((format(printf, 2, 0)));
extern void pn_buf_reset(pn_buf *b);
extern char *pn_buf_steal(pn_buf *b);
extern void pn_buf_free(pn_buf *b);

/* pn_json.c */
extern size_t pn_utf8_len(const char *s, size_t avail);
extern bool pn_json_escape(pn_buf *b, const char *s, size_t n);

/* pn_clock.c */
extern long long pn_now_ms(void);
extern double pn_mono_now(void);

/* pn_log.c */
extern void pn_log_init(const char *program, bool with_pid);
extern void pn_log_set_worker(int worker);
extern void pn_log(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern void pn_log_text(char *dst, size_t size, const char *src);
extern const char *pn_connect_hint(const char *msg);

/* pn_signal.c */
extern void pn_on_stop_signals(void (*handler) (int));

#endif							/* PAYNOTIFY_SHIM_COMMON_H */
