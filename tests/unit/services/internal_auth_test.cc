// The internal credential (services/common/internal_auth.h, internal_token.h)
// and exclusive listeners (issue 45): where a process takes its token from and
// what it refuses, the bearer check, the token file orca serve writes, and a
// second server on a used port failing at start instead of sharing it.

#include "services/common/internal_auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "gtest/gtest.h"
#include "services/common/admin_http_server.h"
#include "services/common/internal_token.h"
#include "services/common/service_main.h"

namespace orca::services {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

std::string TempPath(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/internal_auth_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = TempPath(name);
  std::filesystem::remove(path);
  std::ofstream(path) << contents;
  return path;
}

// Sets (or unsets, for nullopt) ORCA_INTERNAL_TOKEN for one scope.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::optional<std::string> value) {
    if (const char* old = std::getenv(kInternalTokenEnv)) old_ = old;
    if (value) {
      ::setenv(kInternalTokenEnv, value->c_str(), 1);
    } else {
      ::unsetenv(kInternalTokenEnv);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(kInternalTokenEnv, old_->c_str(), 1);
    } else {
      ::unsetenv(kInternalTokenEnv);
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(InternalTokenTest, ValidTokensArePrintableWithoutSpacesAndLongEnough) {
  struct Case {
    std::string token;
    const char* error;  // nullptr = valid
  };
  const Case cases[] = {
      {kToken, nullptr},
      {std::string(16, 'a'), nullptr},
      {std::string(15, 'a'), "must be 16 to 4096 characters, got 15"},
      {"", "got 0"},
      {std::string(4097, 'a'), "got 4097"},
      {"0123456789abcdef 0123", "printable ASCII without spaces"},
      {"0123456789abcdef\x01", "printable ASCII without spaces"},
      {"0123456789abcdef\xc3\xa9", "printable ASCII without spaces"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateInternalToken(c.token, "--internal-token-file f");
    if (c.error == nullptr) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(c.error), std::string::npos) << s;
      EXPECT_NE(s.message().find("--internal-token-file f"), std::string::npos) << s;
    }
  }
}

TEST(InternalTokenTest, AFileHoldsOneTokenPerLineWithCommentsAndBlankLines) {
  const std::string path =
      WriteFile("tokens", std::string("# rotated on Monday\n\n  ") + kToken + "  \nsecond-token-0123456789\n");
  auto tokens = ReadInternalTokenFile(path, "--internal-token-file");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<std::string>{kToken, "second-token-0123456789"}));

  auto missing = ReadInternalTokenFile(TempPath("absent"), "--internal-token-file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--internal-token-file"), std::string::npos) << missing.status();

  auto empty = ReadInternalTokenFile(WriteFile("empty", "# nothing\n\n"), "--internal-token-file");
  EXPECT_NE(empty.status().message().find("holds no token"), std::string::npos) << empty.status();

  auto weak = ReadInternalTokenFile(WriteFile("weak", std::string(kToken) + "\nhunter2\n"), "--internal-token-file");
  EXPECT_EQ(weak.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(weak.status().message().find("line 2"), std::string::npos) << weak.status();
  EXPECT_EQ(weak.status().message().find("hunter2"), std::string::npos) << "never echo a token";
}

TEST(InternalTokenTest, GeneratedTokensAre64HexDigitsAndDiffer) {
  auto a = GenerateInternalToken();
  auto b = GenerateInternalToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos) << *a;
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(ValidateInternalToken(*a, "generated").ok());
}

TEST(InternalTokenTest, TheTokenFileIsCreatedOwnerOnlyAndNeverOverwritten) {
  const std::string path = TempPath("written-token");
  std::filesystem::remove(path);
  ::umask(0);  // even a permissive umask gives 0600
  ASSERT_TRUE(WriteInternalTokenFile(path, kToken).ok());
  ::umask(022);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto back = ReadInternalTokenFile(path, "--internal-token-file");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->front(), kToken);

  EXPECT_FALSE(WriteInternalTokenFile(path, "another-token-0123456789").ok()) << "an existing file is kept";
  EXPECT_EQ(ReadInternalTokenFile(path, "f")->front(), kToken);

  const std::string target = WriteFile("planted-target", "x");
  const std::string link = TempPath("planted-link");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(target, link);
  EXPECT_FALSE(WriteInternalTokenFile(link, kToken).ok()) << "a symlink is not followed";
}

TEST(InternalAuthTest, TheBearerCheckAcceptsOnlyAConfiguredToken) {
  auto auth = InternalAuth::FromTokens({kToken, "second-token-0123456789"}, "test");
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(auth->token(), kToken) << "the first token is the one sent";
  struct Case {
    std::string header;
    const char* error;  // nullptr = accepted
  };
  const Case cases[] = {
      {std::string("Bearer ") + kToken, nullptr},
      {std::string("bearer ") + kToken + "  ", nullptr},
      {"Bearer second-token-0123456789", nullptr},
      {"", "missing internal credential"},
      {"   ", "missing internal credential"},
      {kToken, "must be sent as 'authorization: Bearer <token>'"},
      {std::string("Basic ") + kToken, "must be sent as"},
      {"Bearer ", "must be sent as"},
      {"Bearer  ", "must be sent as"},
      {"Bearer 0123456789abcdef0123456789abcdeX", "wrong internal credential"},
      {std::string("Bearer ") + kToken + "0", "wrong internal credential"},
      {"Bearer 0123456789abcdef", "wrong internal credential"},
  };
  for (const Case& c : cases) {
    const absl::Status s = auth->Check(c.header);
    if (c.error == nullptr) {
      EXPECT_TRUE(s.ok()) << "'" << c.header << "': " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << "'" << c.header << "'";
      EXPECT_NE(s.message().find(c.error), std::string::npos) << "'" << c.header << "': " << s;
    }
  }
  const InternalAuth insecure = InternalAuth::Insecure();
  EXPECT_FALSE(insecure.enabled());
  EXPECT_TRUE(insecure.Check("").ok());
  EXPECT_EQ(insecure.token(), "");
}

InternalAuthFlags Flags(const std::string& token_file, bool insecure = false) {
  InternalAuthFlags f;
  f.token_file = token_file;
  f.insecure = insecure;
  return f;
}

// Where a process takes its credential from: one source, or none with the explicit opt-out;
// anything else refuses to start, naming the flags.
TEST(InternalAuthTest, ACredentialIsRequiredFromExactlyOneSource) {
  const std::string file = WriteFile("token-file", std::string(kToken) + "\n");
  const std::string legacy_file = WriteFile("legacy-file", "legacy-token-0123456789abcdef\n");
  struct Case {
    const char* name;
    InternalAuthFlags flags;
    std::optional<std::string> env;
    std::vector<LegacyCredentialFlag> legacy;
    std::string sent;   // the token sent when it loads
    const char* error;  // nullptr = loads
  };
  const Case cases[] = {
      {"nothing", Flags(""), std::nullopt, {}, "", "no internal credential: give --internal-token-file"},
      {"opt-out", Flags("", true), std::nullopt, {}, "", nullptr},
      {"file", Flags(file), std::nullopt, {}, kToken, nullptr},
      {"environment", Flags(""), "env-token-0123456789abcdef", {}, "env-token-0123456789abcdef", nullptr},
      {"legacy file",
       Flags(""),
       std::nullopt,
       {{"--api-keys-file", legacy_file, {}}},
       "legacy-token-0123456789abcdef",
       nullptr},
      {"legacy value",
       Flags(""),
       std::nullopt,
       {{"--api-keys", "", {"inline-token-0123456789ab"}}},
       "inline-token-0123456789ab",
       nullptr},
      {"file and environment",
       Flags(file),
       "env-token-0123456789abcdef",
       {},
       "",
       "given twice (--internal-token-file and ORCA_INTERNAL_TOKEN)"},
      {"file and legacy",
       Flags(file),
       std::nullopt,
       {{"--scheduler-api-key-file", legacy_file, {}}},
       "",
       "given twice (--internal-token-file and --scheduler-api-key-file)"},
      {"opt-out and file",
       Flags(file, true),
       std::nullopt,
       {},
       "",
       "--insecure-internal and --internal-token-file contradict each other"},
      {"missing file", Flags(TempPath("nope")), std::nullopt, {}, "", "--internal-token-file"},
      {"weak environment", Flags(""), "short", {}, "", "ORCA_INTERNAL_TOKEN: the internal token must be 16 to 4096"},
      {"weak legacy value",
       Flags(""),
       std::nullopt,
       {{"--api-keys", "", {"k1"}}},
       "",
       "--api-keys: the internal token"},
  };
  for (const Case& c : cases) {
    ScopedEnv env(c.env);
    auto auth = LoadInternalAuth(c.flags, c.legacy);
    if (c.error == nullptr) {
      ASSERT_TRUE(auth.ok()) << c.name << ": " << auth.status();
      EXPECT_EQ(auth->token(), c.sent) << c.name;
      EXPECT_EQ(auth->enabled(), !c.sent.empty()) << c.name;
    } else {
      ASSERT_FALSE(auth.ok()) << c.name;
      EXPECT_NE(auth.status().message().find(c.error), std::string::npos) << c.name << ": " << auth.status();
    }
  }
}

// gRPC binds with SO_REUSEPORT by default: a second server on a used port started and took
// a share of the calls. Now it fails at start and names the port.
TEST(ExclusiveListenerTest, ASecondGrpcServerOnAUsedPortFailsNamingThePort) {
  int port = 0;
  auto first = StartGrpcServer("127.0.0.1:0", {}, {.bound_port = &port});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto second = StartGrpcServer(address, {});
  ASSERT_FALSE(second.ok()) << "a second server shares " << address;
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("port " + std::to_string(port)), std::string::npos) << second.status();
  (*first)->Shutdown();
}

// The admin HTTP servers (reuse_address only, which on Linux never admits a second listener).
TEST(ExclusiveListenerTest, ASecondAdminHttpServerOnAUsedPortFailsNamingThePort) {
  AdminHttpServer::Options o;
  o.listen_address = "127.0.0.1:0";
  auto first = AdminHttpServer::Create(o);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->Start().ok());
  const int port = (*first)->port();
  o.listen_address = "127.0.0.1:" + std::to_string(port);
  auto second = AdminHttpServer::Create(o);
  absl::Status started = second.ok() ? (*second)->Start() : second.status();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find(std::to_string(port)), std::string::npos) << started;
  (*first)->Stop();
}

}  // namespace
}  // namespace orca::services
