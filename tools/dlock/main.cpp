// The dlock command: everything lives in the dlock_cli library (tools/dlock/lib).
#include "cli.hpp"

int main(int argc, char** argv) {
    return dlock::cli::run(argc, argv);
}
