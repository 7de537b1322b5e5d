// Adds "who and what" to a status that comes up from a lower layer, keeping its code.
#pragma once


#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ucclzip::transport {

inline absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace ucclzip::transport
