#ifndef UBIQUITY_CHTTPPARSER_SHIM_H
#define UBIQUITY_CHTTPPARSER_SHIM_H
#include <http_parser.h>

// http_parser keeps the method and error in bitfields; plain accessors keep the Swift side
// independent of how the importer lays those out.
static inline unsigned ubq_http_parser_method(const http_parser *p) { return p->method; }
static inline unsigned ubq_http_parser_errno(const http_parser *p) { return p->http_errno; }
#endif
