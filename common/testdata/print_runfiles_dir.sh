#!/bin/sh
# companion_program_test's companion: prints the runfiles tree it was handed.
printf '%s' "${RUNFILES_DIR-unset}"
