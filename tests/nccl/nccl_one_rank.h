// A one-rank NCCL communicator of this process, on host buffers: the fixture of the shim's
// tests and of its misuse probes.
#pragma once

#include <gtest/gtest.h>
#include <nccl.h>

#include "nccl/status.h"

namespace ucclzip::nccl {

class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << LastError();
    ASSERT_EQ(ncclCommInitRank(&comm_, 1, id, 0), ncclSuccess) << LastError();
  }
  void TearDown() override {
    if (comm_ != nullptr) EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess) << LastError();
  }
  ncclComm_t comm_ = nullptr;
};

}  // namespace ucclzip::nccl
