// main.cpp: the `dlock` executable. Everything lives in the dlock_cli library (tools/dlock/lib)
// so that tests can run the commands with injected streams.
#include "cli.hpp"

int main(int argc, char** argv) {
    return dlock::cli::run(argc, argv);
}
