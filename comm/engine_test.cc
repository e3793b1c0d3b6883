// The engine list: ordered by each registration's `order`, whatever order
// the registrations ran in. This binary links no engine library, so the
// list holds only the engines registered below.
#include "comm/engine.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

int made_b = 0;

Engine Named(std::string name) {
  Engine e;
  e.name = std::move(name);
  return e;
}

Engine A() {
  Engine e = Named("a");
  e.auto_order = 7;
  return e;
}
Engine B() {
  ++made_b;
  return Named("b");
}
Engine C() { return Named("c"); }
Engine D() { return Named("d"); }

// Registered out of order, and B and D at the same position.
TANDEM_REGISTER_ENGINE(30, C);
TANDEM_REGISTER_ENGINE(10, A);
TANDEM_REGISTER_ENGINE(20, D);
TANDEM_REGISTER_ENGINE(20, B);

std::vector<std::string> Names(const std::vector<Engine>& engines) {
  std::vector<std::string> names;
  for (const Engine& e : engines) names.push_back(e.name);
  return names;
}

TEST(EngineRegistryTest, OrderedByOrderThenName) {
  EXPECT_EQ(Names(RegisteredEngines()),
            (std::vector<std::string>{"a", "b", "d", "c"}));
}

TEST(EngineRegistryTest, EachCallMakesFreshEngines) {
  const int before = made_b;
  std::vector<Engine> first = RegisteredEngines();
  first[0].auto_order = 99;
  const std::vector<Engine> second = RegisteredEngines();
  EXPECT_EQ(second[0].auto_order, 7);
  EXPECT_EQ(made_b, before + 2);
}

TEST(LaunchContextTest, WhoStartedThisProcess) {
  LaunchContext plain;
  EXPECT_FALSE(plain.under_torchrun());
  EXPECT_FALSE(plain.under_mpi_launcher());
  EXPECT_EQ(plain.launched_world_size(), 1);
  for (const std::string launcher : {"OpenMPI", "Slurm", "torchrun"}) {
    LaunchContext here;
    here.launch = LaunchEnv{};
    here.launch->launcher = launcher;
    here.launch->world_size = 3;
    EXPECT_EQ(here.under_torchrun(), launcher == "torchrun") << launcher;
    EXPECT_EQ(here.under_mpi_launcher(), launcher != "torchrun") << launcher;
    EXPECT_EQ(here.launched_world_size(), 3);
  }
}

}  // namespace
}  // namespace tandem::comm
