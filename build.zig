//! Builds libmtc (shared and static) from the C sources in lib/src/*/, the
//! emulated CUDA driver used by tests (when tests/fake_cuda/ exists), and the
//! C tests. `zig build` installs zig-out/lib/libmtc.{so,a} and
//! zig-out/include/mtc.h (with its topic headers, zig-out/include/mtc/);
//! `zig build test` runs the C tests.
//!
//! CUDA kernels: when nvcc is found (.tools/nvcc, which scripts/setup.sh
//! installs, or -Dnvcc=PATH), cuda/mtc_kernels.cu is compiled into one fatbin
//! whose bytes are embedded into libmtc (MTC_HAVE_KERNELS); without nvcc, or
//! with -Dkernels=false, libmtc builds without them and mtc_has_kernels()
//! returns 0.
const std = @import("std");

/// libmtc's C sources, folder by folder, in the order of a copy's pipeline:
/// a folder includes headers only from itself and the folders listed after
/// it (scripts/check_c_layout.py checks this; docs/ARCHITECTURE.md is the map).
/// A new file needs only its folder's list.
const lib_folders = [_]SourceFolder{
    // the plan's life cycle: create, add, submit, wait, results, release
    .{ .path = "lib/src/plan", .files = &.{ "create.c", "destinations.c", "exit.c", "owner.c", "owner_refs.c", "owner_table.c", "phase.c", "prepared.c", "prepared_tables.c", "release.c", "results.c", "stats.c", "submit.c", "validate.c", "overlap.c", "wait.c" } },
    // carrying a submitted plan out: background thread, one file per direction
    .{ .path = "lib/src/run", .files = &.{ "background.c", "copy_out.c", "gather.c", "host_copy.c", "in_flight.c", "into.c", "into_scatter.c", "into_host.c", "peer.c", "plan_state.c", "staging.c", "to_device.c", "to_host.c", "trace.c", "trace_file.c", "transfer.c", "transfer_context.c" } },
    // where each leaf goes: reused, packed into a chunk, or its own block
    .{ .path = "lib/src/layout", .files = &.{"planner.c"} },
    // gathering host leaves into staging memory on the staging threads
    .{ .path = "lib/src/stage", .files = &.{ "stage_copy.c", "staging_pool.c", "strided.c" } },
    // output blocks, the pinned pool, DLPack
    .{ .path = "lib/src/memory", .files = &.{ "block.c", "device_alloc.c", "dlpack.c", "host_alloc.c", "launch_blocks.c", "pinned_pool.c", "warm_up.c" } },
    // the driver (loaded at run time), devices, streams, events, kernels
    .{ .path = "lib/src/cuda", .files = &.{ "debug_kernels.c", "device.c", "device_calls.c", "driver.c", "event.c", "fault.c", "kernels.c", "launch.c", "stream_api.c", "user_module.c" } },
    // errors, options, environment knobs, the clock, version
    .{ .path = "lib/src/base", .files = &.{ "clock.c", "env.c", "error.c", "id_map.c", "keep_loaded.c", "library.c", "options.c", "spin.c" } },
};

const SourceFolder = struct { path: []const u8, files: []const []const u8 };

const lib_flags = [_][]const u8{
    "-std=c11",
    "-D_GNU_SOURCE",
    // Only symbols marked MTC_API (all named mtc_*) leave the shared library.
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-Wshadow",
    "-Wstrict-prototypes",
    "-Werror",
};

/// The translation unit nvcc compiles (it includes the other .cu files), and
/// every file it reads, so that editing any of them rebuilds the fatbin.
const kernel_source = "cuda/mtc_kernels.cu";
const kernel_inputs = [_][]const u8{
    "cuda/copy_common.cuh",
    "cuda/copy_segments.cu",
    "cuda/debug_kernels.cu",
};

/// SASS for sm_80 (A100), sm_90 (H100, H200) and sm_100 (B200), and PTX for
/// compute_100, which the driver compiles for any later GPU.
const nvcc_flags = [_][]const u8{
    "--fatbin",
    "-O3",
    "-std=c++17",
    "-gencode",
    "arch=compute_80,code=sm_80",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_100,code=[sm_100,compute_100]",
};

/// The emulated driver, one file per driver area (tests/fake_cuda/fake_cuda.h
/// lists them); fake_cuda.c is the one whose presence enables the device tests.
const fake_cuda_source = "tests/fake_cuda/fake_cuda.c";
const fake_cuda_sources = [_][]const u8{
    fake_cuda_source,
    "tests/fake_cuda/fake_registry.c",
    "tests/fake_cuda/fake_context.c",
    "tests/fake_cuda/fake_streams.c",
    "tests/fake_cuda/fake_memory.c",
    "tests/fake_cuda/fake_modules.c",
    "tests/fake_cuda/fake_launch.c",
    "tests/fake_cuda/fake_races.c",
};
const fake_cuda_selftest_source = "tests/fake_cuda/fake_cuda_selftest.c";

const fake_cuda_flags = [_][]const u8{
    "-std=c11",
    "-D_GNU_SOURCE",
    // Only the driver's calls and the test hooks (FAKE_API) leave the library.
    "-fvisibility=hidden",
};

const test_flags = [_][]const u8{
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
};

/// C tests that link the static library (and so can reach internal headers).
const unit_tests = [_][]const u8{
    "test_planner",
    "test_host",
    "test_env",
    "test_id_map",
};

/// C tests of the device paths: like unit_tests, run against the emulated
/// driver (its path is their first argument).
const device_tests = [_][]const u8{
    "test_device",
    "test_streams",
    "test_dlpack",
    "test_stop_reading",
    "test_staging",
    "test_misuse",
    "test_pinned_limit",
    "test_strided",
    "test_into",
    "test_into_rules",
    "test_user_kernels",
    "test_pinned_direct",
    "test_threads",
    "test_owners",
    "test_owner_threads",
    "test_pinned_order",
    "test_owner_guards",
    "test_plan_guards",
    "test_parcels",
    "test_prepared",
    "test_prepared_rules",
    "test_prepared_tables",
};

/// The header compiled as C and as C++ with warnings as errors.
const header_c_flags = [_][]const u8{ "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic" };
const header_cpp_flags = [_][]const u8{ "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic" };

/// What every module of this build is compiled for.
const Config = struct {
    target: std.Build.ResolvedTarget,
    optimize: std.builtin.OptimizeMode,
    tsan: bool,
    /// `-Dsanitize=address`: the AddressSanitizer runtime the tests link
    /// (zig ships none), or null.
    asan_runtime: ?[]const u8,
};

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const config = Config{
        .target = target,
        .optimize = optimize,
        // `zig build test -Dtsan` runs the C tests under ThreadSanitizer.
        .tsan = b.option(bool, "tsan", "Build with ThreadSanitizer (for the tests)") orelse false,
        // `zig build test -Dsanitize=address`: AddressSanitizer and UBSan.
        .asan_runtime = asanRuntime(b),
    };

    // The kernels' fatbin as a C source, or null: built without kernels.
    const kernels = kernelSource(b);

    // `-Dstrip`: the npm package's build (npm run build:prebuilt).
    const strip = b.option(bool, "strip", "libmtc.so without debug info or the checkout's path: the same bytes from the same commit anywhere") orelse false;
    const shared_mod = libModule(b, config, kernels);
    if (strip) reproducible(b, shared_mod);
    const shared = b.addLibrary(.{
        .name = "mtc",
        .linkage = .dynamic,
        // No .version: one plain libmtc.so file (no symlink chain), which
        // packagers and FFI loaders copy and open as is.
        .root_module = shared_mod,
    });
    // mtc.h, the one header to include, and its topic headers (mtc/*.h).
    shared.installHeader(b.path("lib/include/mtc.h"), "mtc.h");
    shared.installHeadersDirectory(b.path("lib/include/mtc"), "mtc", .{});
    b.installArtifact(shared);

    const static = b.addLibrary(.{
        .name = "mtc",
        .linkage = .static,
        .root_module = libModule(b, config, kernels),
    });
    b.installArtifact(static);

    // `zig build examples`: examples/c/copy_batch, linked to libmtc.so, in bin/.
    const examples_step = b.step("examples", "Build the C example (examples/c) into bin/, next to lib/libmtc.so");
    const example_mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
    example_mod.addCSourceFiles(.{ .files = &.{"examples/c/copy_batch.c"}, .flags = &(test_flags ++ .{"-pedantic"}) });
    example_mod.addIncludePath(b.path("lib/include"));
    example_mod.linkLibrary(shared);
    // libmtc.so is found in ../lib (zig-out) or beside the binary (.carry/lib).
    example_mod.addRPathSpecial("$ORIGIN/../lib");
    example_mod.addRPathSpecial("$ORIGIN");
    const example = b.addExecutable(.{ .name = "copy_batch", .root_module = example_mod });
    examples_step.dependOn(&b.addInstallArtifact(example, .{}).step);
    examples_step.dependOn(b.getInstallStep());

    const test_step = b.step("test", "Run the C tests");

    for (unit_tests) |name| {
        const exe = testExecutable(b, name, config, static);
        const run = b.addRunArtifact(exe);
        test_step.dependOn(&run.step);
    }

    // The device tests need the emulated driver, which tests/fake_cuda/
    // provides; without it they are skipped, saying so.
    if (fileExists(b, fake_cuda_source)) {
        const fake_mod = b.createModule(.{
            .target = target,
            .optimize = optimize,
            .link_libc = true,
        });
        fake_mod.addCSourceFiles(.{ .files = &fake_cuda_sources, .flags = &fake_cuda_flags });
        // The npm package ships it (libcuda-emulated.so), built as libmtc is.
        if (strip) reproducible(b, fake_mod);
        fake_mod.addIncludePath(b.path("tests/fake_cuda"));
        fake_mod.linkSystemLibrary("pthread", .{});
        const fake = b.addLibrary(.{
            .name = "fakecuda",
            .linkage = .dynamic,
            .root_module = fake_mod,
        });
        const install_fake = b.addInstallArtifact(fake, .{});
        b.getInstallStep().dependOn(&install_fake.step);

        // The device tests run against the real driver too: with no arguments
        // on a CUDA host. `zig build gpu-test-bins` installs them in bin/.
        const gpu_bins = b.step("gpu-test-bins", "Install the C tests that also run against the real driver (bin/); run each with no arguments on a CUDA host");
        for (device_tests) |name| {
            const exe = testExecutable(b, name, config, static);
            gpu_bins.dependOn(&b.addInstallArtifact(exe, .{}).step);
            const run = b.addRunArtifact(exe);
            // The test sets MTC_CUDA_DRIVER to this path before its first libmtc call.
            run.addFileArg(fake.getEmittedBin());
            test_step.dependOn(&run.step);
        }

        // test_dlpack again with dlpack.h's declarations included before mtc.h.
        const dlpack_first = testExecutable(b, "test_dlpack", config, static);
        dlpack_first.root_module.addCMacro("MTC_TEST_DLPACK_HEADER_FIRST", "1");
        const run_dlpack_first = b.addRunArtifact(dlpack_first);
        run_dlpack_first.setName("run test_dlpack (dlpack.h first)");
        run_dlpack_first.addFileArg(fake.getEmittedBin());
        test_step.dependOn(&run_dlpack_first.step);

        // Copies into existing memory between the two emulated GPUs, with
        // and without peer access (libmtc sets a pair up once a process).
        const into_peer = testExecutable(b, "test_into_peer", config, static);
        gpu_bins.dependOn(&b.addInstallArtifact(into_peer, .{}).step);
        for ([_][]const u8{ "peer", "no-peer" }) |mode| {
            const run_into_peer = b.addRunArtifact(into_peer);
            run_into_peer.setName(b.fmt("run test_into_peer ({s})", .{mode}));
            run_into_peer.addFileArg(fake.getEmittedBin());
            run_into_peer.addArg(mode);
            test_step.dependOn(&run_into_peer.step);
        }

        // MTC_FAULT's scenarios, each in a child process of its own.
        const faults = testExecutable(b, "test_faults", config, static);
        const run_faults = b.addRunArtifact(faults);
        run_faults.addFileArg(fake.getEmittedBin());
        test_step.dependOn(&run_faults.step);

        kernelTests(b, config, test_step, gpu_bins, fake, static, kernels);

        // The emulated driver's own checks, when its author has written them.
        if (fileExists(b, fake_cuda_selftest_source)) {
            const selftest_mod = b.createModule(.{
                .target = target,
                .optimize = optimize,
                .link_libc = true,
            });
            selftest_mod.addCSourceFiles(.{ .files = &.{fake_cuda_selftest_source}, .flags = &fake_cuda_flags });
            selftest_mod.linkSystemLibrary("pthread", .{});
            selftest_mod.linkSystemLibrary("dl", .{});
            const selftest = b.addExecutable(.{ .name = "fake_cuda_selftest", .root_module = selftest_mod });
            const run_selftest = b.addRunArtifact(selftest);
            run_selftest.addFileArg(fake.getEmittedBin());
            test_step.dependOn(&run_selftest.step);
        }
    } else {
        const note = b.addSystemCommand(&.{ "echo", "test_device skipped: " ++ fake_cuda_source ++ " is missing" });
        test_step.dependOn(&note.step);
    }

    const header_c = headerTest(b, "header_c", "tests/c/header_c.c", &header_c_flags, false, config, static);
    test_step.dependOn(&b.addRunArtifact(header_c).step);
    const header_cpp = headerTest(b, "header_cpp", "tests/c/header_cpp.cpp", &header_cpp_flags, true, config, static);
    test_step.dependOn(&b.addRunArtifact(header_cpp).step);
}

fn fileExists(b: *std.Build, path: []const u8) bool {
    b.build_root.handle.access(path, .{}) catch return false;
    return true;
}

/// Compiles cuda/ with nvcc and turns the fatbin into a C source (by
/// cuda/embed_fatbin.zig) that defines mtc_kernels_fatbin; null when libmtc
/// is built without kernels.
fn kernelSource(b: *std.Build) ?std.Build.LazyPath {
    const wanted = b.option(bool, "kernels", "Embed the CUDA kernels of cuda/ (needs nvcc; default: when nvcc is found)");
    const nvcc_option = b.option([]const u8, "nvcc", "nvcc to compile cuda/ with (default: .tools/nvcc from scripts/setup.sh)");
    const ccbin = b.option([]const u8, "nvcc-ccbin", "Host C++ compiler for nvcc, its -ccbin (default: nvcc's, g++)");
    if (wanted == false) return null;
    const default_nvcc = ".tools/nvcc";
    const nvcc = nvcc_option orelse if (fileExists(b, default_nvcc)) b.pathFromRoot(default_nvcc) else {
        if (wanted == true) {
            std.debug.print("error: -Dkernels=true needs nvcc: run scripts/setup.sh, or pass -Dnvcc=PATH\n", .{});
            std.process.exit(1);
        }
        return null;
    };

    const compile = b.addSystemCommand(&.{nvcc});
    compile.setName("nvcc " ++ kernel_source);
    compile.addArgs(&nvcc_flags);
    if (ccbin) |path| compile.addArgs(&.{ "-ccbin", path });
    compile.addArg("-o");
    const fatbin = compile.addOutputFileArg("mtc_kernels.fatbin");
    compile.addFileArg(b.path(kernel_source));
    for (kernel_inputs) |path| compile.addFileInput(b.path(path));
    // The wrapper names nvcc's version: a new one rebuilds the fatbin.
    if (nvcc_option == null) compile.addFileInput(b.path(default_nvcc));

    const embed = b.addExecutable(.{
        .name = "embed_fatbin",
        .root_module = b.createModule(.{
            .root_source_file = b.path("cuda/embed_fatbin.zig"),
            .target = b.graph.host,
            .optimize = .ReleaseSafe,
        }),
    });
    const generate = b.addRunArtifact(embed);
    generate.addFileArg(fatbin);
    const source = generate.addOutputFileArg("mtc_kernels_fatbin.c");
    generate.addArg("mtc_kernels_fatbin");
    return source;
}

/// test_kernels against the emulated driver three ways: with the kernels
/// built in (nvcc's fatbin, or without nvcc a stand-in image that only the
/// emulated driver accepts), with a library built without them, and with a
/// driver that lacks the module and launch calls.
fn kernelTests(
    b: *std.Build,
    config: Config,
    test_step: *std.Build.Step,
    gpu_bins: *std.Build.Step,
    fake: *std.Build.Step.Compile,
    static: *std.Build.Step.Compile,
    kernels: ?std.Build.LazyPath,
) void {
    const stub_image = kernels == null;
    const with_kernels = if (kernels != null) static else blk: {
        const stub = b.addWriteFiles().add("mtc_kernels_stub.c",
            \\/* No nvcc at build time: a stand-in for the kernels' fatbin that only the
            \\ * emulated driver (tests/fake_cuda) accepts. Test builds only. */
            \\#include <stddef.h>
            \\__attribute__((visibility("hidden"), aligned(64)))
            \\const unsigned char mtc_kernels_fatbin[] = "libmtc test stub, not a fatbin";
            \\__attribute__((visibility("hidden")))
            \\const size_t mtc_kernels_fatbin_size = sizeof mtc_kernels_fatbin;
            \\
        );
        break :blk b.addLibrary(.{ .name = "mtc_stub_kernels", .linkage = .static, .root_module = libModule(b, config, stub) });
    };
    const without_kernels = if (kernels == null) static else b.addLibrary(.{
        .name = "mtc_no_kernels",
        .linkage = .static,
        .root_module = libModule(b, config, null),
    });

    const exe = kernelTestExecutable(b, "test_kernels", config, with_kernels, stub_image);
    const run = b.addRunArtifact(exe);
    run.addFileArg(fake.getEmittedBin());
    run.addArg("kernels");
    test_step.dependOn(&run.step);

    const exe_none = kernelTestExecutable(b, "test_kernels_none", config, without_kernels, false);
    const run_none = b.addRunArtifact(exe_none);
    run_none.addFileArg(fake.getEmittedBin());
    run_none.addArg("none");
    test_step.dependOn(&run_none.step);

    // The emulated driver again, without cuModuleLoadData and the rest.
    const old_mod = b.createModule(.{
        .target = config.target,
        .optimize = config.optimize,
        .link_libc = true,
    });
    old_mod.addCSourceFiles(.{ .files = &fake_cuda_sources, .flags = &(fake_cuda_flags ++ .{"-DFAKE_CUDA_NO_MODULE_API"}) });
    old_mod.linkSystemLibrary("pthread", .{});
    const old_driver = b.addLibrary(.{ .name = "fakecuda_no_modules", .linkage = .dynamic, .root_module = old_mod });
    const run_old = b.addRunArtifact(exe);
    run_old.addFileArg(old_driver.getEmittedBin());
    run_old.addArg("no-module-api");
    test_step.dependOn(&run_old.step);

    // The real-GPU form of the same test: run with no arguments on a CUDA
    // host (MTC_CUDA_DRIVER unset), it checks the real kernels byte by byte.
    gpu_bins.dependOn(&b.addInstallArtifact(exe, .{}).step);
}

fn kernelTestExecutable(
    b: *std.Build,
    name: []const u8,
    config: Config,
    lib: *std.Build.Step.Compile,
    stub_image: bool,
) *std.Build.Step.Compile {
    const mod = b.createModule(.{
        .target = config.target,
        .optimize = config.optimize,
        .link_libc = true,
        .sanitize_thread = config.tsan,
    });
    mod.addCSourceFiles(.{
        .files = &.{"tests/c/test_kernels.c"},
        .flags = &(test_flags ++ .{"-Wshadow"}),
    });
    if (stub_image) mod.addCMacro("MTC_TEST_STUB_KERNEL_IMAGE", "1");
    mod.addIncludePath(b.path("lib/include"));
    mod.addIncludePath(b.path("lib/src"));
    mod.addIncludePath(b.path("tests/c"));
    mod.linkLibrary(lib);
    mod.linkSystemLibrary("pthread", .{});
    mod.linkSystemLibrary("dl", .{});
    sanitize(b, config, mod, true);
    return b.addExecutable(.{ .name = name, .root_module = mod });
}

fn libModule(b: *std.Build, config: Config, kernels: ?std.Build.LazyPath) *std.Build.Module {
    const mod = b.createModule(.{
        .target = config.target,
        .optimize = config.optimize,
        .link_libc = true,
        .pic = true,
        .sanitize_thread = config.tsan,
    });
    for (lib_folders) |folder| {
        mod.addCSourceFiles(.{ .root = b.path(folder.path), .files = folder.files, .flags = &lib_flags });
    }
    if (kernels) |source| {
        mod.addCSourceFile(.{ .file = source, .flags = &lib_flags });
        mod.addCMacro("MTC_HAVE_KERNELS", "1");
    }
    mod.addIncludePath(b.path("lib/include"));
    mod.addIncludePath(b.path("lib/src"));
    // dlopen and pthreads live in glibc >= 2.34; naming them keeps older
    // glibc targets linking too.
    mod.linkSystemLibrary("pthread", .{});
    mod.linkSystemLibrary("dl", .{});
    sanitize(b, config, mod, false);
    return mod;
}

fn testExecutable(
    b: *std.Build,
    name: []const u8,
    config: Config,
    static: *std.Build.Step.Compile,
) *std.Build.Step.Compile {
    const mod = b.createModule(.{
        .target = config.target,
        .optimize = config.optimize,
        .link_libc = true,
        .sanitize_thread = config.tsan,
    });
    mod.addCSourceFiles(.{
        .files = &.{b.fmt("tests/c/{s}.c", .{name})},
        .flags = &test_flags,
    });
    mod.addIncludePath(b.path("lib/include"));
    mod.addIncludePath(b.path("lib/src"));
    mod.addIncludePath(b.path("tests/c"));
    mod.linkLibrary(static);
    mod.linkSystemLibrary("pthread", .{});
    sanitize(b, config, mod, true);
    return b.addExecutable(.{ .name = name, .root_module = mod });
}

fn headerTest(
    b: *std.Build,
    name: []const u8,
    source: []const u8,
    flags: []const []const u8,
    cpp: bool,
    config: Config,
    static: *std.Build.Step.Compile,
) *std.Build.Step.Compile {
    const mod = b.createModule(.{
        .target = config.target,
        .optimize = config.optimize,
        .link_libc = true,
        .link_libcpp = cpp,
        .sanitize_thread = config.tsan,
    });
    mod.addCSourceFiles(.{ .files = &.{source}, .flags = flags });
    // Only the public header: these tests prove it stands alone.
    mod.addIncludePath(b.path("lib/include"));
    mod.linkLibrary(static);
    sanitize(b, config, mod, true);
    return b.addExecutable(.{ .name = name, .root_module = mod });
}

/// `-Dsanitize=address`: the runtime's path. Zig compiles C with ASan
/// instrumentation but ships no ASan runtime, so the tests link the
/// system's (GCC's libasan, which the instrumentation's ABI matches);
/// -Dasan-runtime=PATH names another.
fn asanRuntime(b: *std.Build) ?[]const u8 {
    const Sanitizer = enum { none, address };
    const wanted = b.option(Sanitizer, "sanitize", "address: build the C tests with AddressSanitizer and UBSan (links GCC's libasan)") orelse .none;
    const given = b.option([]const u8, "asan-runtime", "AddressSanitizer runtime for -Dsanitize=address (default: gcc -print-file-name=libasan.so)");
    if (wanted == .none) return null;
    if (given) |path| return path;
    const found = std.process.Child.run(.{
        .allocator = b.allocator,
        .argv = &.{ "gcc", "-print-file-name=libasan.so" },
    }) catch null;
    if (found) |run| {
        const path = std.mem.trim(u8, run.stdout, " \n");
        // gcc echoes the bare name back when it has no such file.
        if (std.fs.path.isAbsolute(path)) return path;
    }
    std.debug.print("error: -Dsanitize=address needs an AddressSanitizer runtime and zig ships none: " ++
        "install GCC's (Debian: apt-get install gcc, which brings libasan8) or pass -Dasan-runtime=/path/to/libasan.so\n", .{});
    std.process.exit(1);
}

/// Under -Dsanitize=address: instruments mod's C sources for
/// AddressSanitizer, makes UBSan report (not trap), and links the ASan
/// runtime into executables.
fn sanitize(b: *std.Build, config: Config, mod: *std.Build.Module, executable: bool) void {
    const runtime = config.asan_runtime orelse return;
    mod.sanitize_c = .full;
    addCFlags(b, mod, &.{ "-fsanitize=address", "-fno-omit-frame-pointer" });
    if (executable) mod.addObjectFile(.{ .cwd_relative = runtime });
}

/// Under -Dstrip: no debug info (it names every source and header by its
/// absolute path), and the checkout's path written as "." wherever the
/// compiler would record it (__FILE__ and the like). What is left depends on
/// the sources and the toolchain, not on the folder or the machine.
fn reproducible(b: *std.Build, mod: *std.Build.Module) void {
    mod.strip = true;
    const root = b.build_root.handle.realpathAlloc(b.allocator, ".") catch @panic("cannot resolve the build root");
    addCFlags(b, mod, &.{b.fmt("-ffile-prefix-map={s}=.", .{root})});
}

/// Appends flags to every C source already added to mod.
fn addCFlags(b: *std.Build, mod: *std.Build.Module, flags: []const []const u8) void {
    for (mod.link_objects.items) |item| switch (item) {
        .c_source_files => |files| files.flags = std.mem.concat(b.allocator, []const u8, &.{ files.flags, flags }) catch @panic("OOM"),
        .c_source_file => |file| file.flags = std.mem.concat(b.allocator, []const u8, &.{ file.flags, flags }) catch @panic("OOM"),
        else => {},
    };
}
