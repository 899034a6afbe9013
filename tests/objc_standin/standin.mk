# standin.mk - the stand-in Objective-C/Metal runtime (tests/objc_standin/),
# included by the Makefile: a shared library that backends/metal/objc_rt.c loads
# instead of Apple's frameworks when $MQ_OBJC_RUNTIME names it, so `make test`
# runs the unmodified backends/metal/metal.c on the MSL executor. It is built from
# position-independent copies of the executor's objects (the tools' own are
# not PIC) and its own files; tests/test_metal_standin.sh drives it.
STANDIN_EXT ?= $(if $(DYLIB_EXT),$(DYLIB_EXT),.so)
STANDIN_LIB  = $(BUILD)/tests/libobjc_standin$(STANDIN_EXT)
STANDIN_SRC  = $(wildcard tests/objc_standin/*.c) tests/objc_standin/msgsend.S \
               $(addprefix backends/msl_cpu/,msl_exec.c msl_child.c msl_sched.c msl_fiber.c \
                 msl_module.c msl_translate.c msl_signature.c) \
               metal/metal_source.c \
               kernels/grow.c
STANDIN_OBJ  = $(patsubst %,$(BUILD)/pic/%.o,$(STANDIN_SRC))
STANDIN_INC  = $(INC_backends) -Ibackends/msl_cpu -Ibackends/metal -Itests/objc_standin

$(BUILD)/pic/%.c.o: %.c $(HEADERS) $(wildcard tests/objc_standin/*.h) tests/objc_standin/apple_decls.inc
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC $(STANDIN_INC) -c $< -o $@

$(BUILD)/pic/%.S.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out -std=c11,$(CFLAGS)) -fPIC -c $< -o $@

$(STANDIN_LIB): $(STANDIN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared $(LDFLAGS) $^ -ldl -lm -pthread -o $@

# The trampoline alone with every kind of argument and result
# (tests/msgsend_abi.c), natively; tests/test_msgsend_arm64.sh runs the
# same for AArch64 under qemu-user where a cross compiler is installed.
MSGSEND_ABI = $(BUILD)/tests/msgsend_abi
$(MSGSEND_ABI): tests/msgsend_abi.c tests/objc_standin/msgsend.S backends/metal/objc_rt.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Ibackends/metal tests/msgsend_abi.c tests/objc_standin/msgsend.S $(LDFLAGS) -o $@
