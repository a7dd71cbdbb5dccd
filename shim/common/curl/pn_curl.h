/*
 * pn_curl.h
 *	  What the shim's daemons (paynotify-relay, paynotify-reconcile) share
 *	  about their HTTP requests: which addresses a request may connect to,
 *	  checked on every connection, and the coarse class of a failure that
 *	  may be recorded or logged without libcurl's text.  Needs libcurl.
 */
#ifndef PAYNOTIFY_SHIM_CURL_H
#define PAYNOTIFY_SHIM_CURL_H

#include <stdbool.h>

#include <curl/curl.h>

#include "pn_common.h"

extern void pn_curl_guard(CURL *easy, bool allow_private, bool *blocked);
extern const char *pn_curl_error_class(CURLcode rc);

#endif							/* PAYNOTIFY_SHIM_CURL_H */
