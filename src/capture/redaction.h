// What teller keeps of a traced program's environment and command line, so that a
// bundle (meta.json, ProcessInfo records) never carries a credential. One rule for
// the launcher (`src/record/`) and the injected library (docs/capture.md, "Redaction"):
//
// - Environment: a NAME is secret when it contains TOKEN, KEY, SECRET, PASSWORD or
//   CREDENTIAL anywhere (case-insensitive): IsSecretEnvironmentName.
// - Command-line options: a name is secret when it holds one of those words or
//   PASSWD or AUTH(ORIZATION) as a word ending there (end, or a non-letter next; a
//   plural S allowed except for TOKEN), so `--api-key`, `--hf_token`, `--apikey`,
//   `--db-passwords` are secret and `--max-num-batched-tokens`, `--tokenizer`,
//   `--keyfile` are not (counts and paths stay readable): IsSecretOptionName.
// - Command line: `--name=value` / `-name=value` / `NAME=value` with a secret option
//   name keep the name and replace the value by "<redacted>"; a bare
//   `--secret-name` replaces the next argument unless it starts with "--"; anywhere in
//   any argument, credential-shaped text is replaced: Hugging Face `hf_...`, OpenAI-
//   style `sk-...`, GitHub `ghp_/gho_/ghs_/ghu_/github_pat_...`, Slack `xox?-...`,
//   AWS key ids `AKIA...`, `Bearer <x>`, and the password of `scheme://user:password@`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace teller::capture {

inline constexpr std::string_view kRedacted = "<redacted>";

bool IsSecretEnvironmentName(std::string_view name);
bool IsSecretOptionName(std::string_view name);

// The arguments with every credential replaced (same count, same order).
std::vector<std::string> RedactCommandLine(std::vector<std::string> argv);

// Credential-shaped substrings of one piece of text replaced (no name rules).
std::string RedactCredentialText(std::string_view text);

}  // namespace teller::capture
