// Note: FLOW_LOG, the switch for "print what the compiler decided". FLOW_LOG is a comma-separated
// list of topics (fusion, codegen, cache, ...; case-insensitive, spaces ignored); "all" enables
// every topic. It is read once, on first use, so checking it is a load and a compare on hot paths.
// Output goes to stderr, one line per decision, prefixed "[flow:<topic>]".
#pragma once
#include <string>

namespace flow::jit {

// True if FLOW_LOG lists `topic` (or "all").
bool log_enabled(const char* topic);
// Prints "[flow:<topic>] <msg>" to stderr as one write. It does not check log_enabled (so it can
// also print warnings); guard calls with log_enabled() to avoid building messages nobody reads.
void log_line(const char* topic, const std::string& msg);
// The parsing behind log_enabled, exposed for tests: does the FLOW_LOG value `spec` enable `topic`?
bool log_spec_enables(const std::string& spec, const std::string& topic);

}  // namespace flow::jit
