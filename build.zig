//! Builds libmtc (shared and static) from the C sources in lib/src, the
//! emulated CUDA driver used by tests (when tests/fake_cuda/ exists), and the
//! C tests. `zig build` installs zig-out/lib/libmtc.{so,a} and
//! zig-out/include/mtc.h; `zig build test` runs the C tests.
const std = @import("std");

const lib_sources = [_][]const u8{
    "lib/src/api.c",
    "lib/src/background.c",
    "lib/src/block.c",
    "lib/src/cuda_driver.c",
    "lib/src/device.c",
    "lib/src/error.c",
    "lib/src/keep_loaded.c",
    "lib/src/options.c",
    "lib/src/pinned_pool.c",
    "lib/src/plan.c",
    "lib/src/planner.c",
    "lib/src/stage_copy.c",
    "lib/src/staging_pool.c",
    "lib/src/transfer.c",
};

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

const fake_cuda_source = "tests/fake_cuda/fake_cuda.c";
const fake_cuda_selftest_source = "tests/fake_cuda/fake_cuda_selftest.c";

const fake_cuda_flags = [_][]const u8{
    "-std=c11",
    "-D_GNU_SOURCE",
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
};

/// The header compiled as C and as C++ with warnings as errors.
const header_c_flags = [_][]const u8{ "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic" };
const header_cpp_flags = [_][]const u8{ "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic" };

/// What every module of this build is compiled for.
const Config = struct {
    target: std.Build.ResolvedTarget,
    optimize: std.builtin.OptimizeMode,
    tsan: bool,
};

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const config = Config{
        .target = target,
        .optimize = optimize,
        // `zig build test -Dtsan` runs the C tests under ThreadSanitizer.
        .tsan = b.option(bool, "tsan", "Build with ThreadSanitizer (for the tests)") orelse false,
    };

    const shared = b.addLibrary(.{
        .name = "mtc",
        .linkage = .dynamic,
        // No .version: one plain libmtc.so file (no symlink chain), which
        // packagers and FFI loaders copy and open as is.
        .root_module = libModule(b, config),
    });
    shared.installHeader(b.path("lib/include/mtc.h"), "mtc.h");
    b.installArtifact(shared);

    const static = b.addLibrary(.{
        .name = "mtc",
        .linkage = .static,
        .root_module = libModule(b, config),
    });
    b.installArtifact(static);

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
        fake_mod.addCSourceFiles(.{ .files = &.{fake_cuda_source}, .flags = &fake_cuda_flags });
        fake_mod.addIncludePath(b.path("tests/fake_cuda"));
        fake_mod.linkSystemLibrary("pthread", .{});
        const fake = b.addLibrary(.{
            .name = "fakecuda",
            .linkage = .dynamic,
            .root_module = fake_mod,
        });
        const install_fake = b.addInstallArtifact(fake, .{});
        b.getInstallStep().dependOn(&install_fake.step);

        const exe = testExecutable(b, "test_device", config, static);
        const run = b.addRunArtifact(exe);
        // The test sets MTC_CUDA_DRIVER to this path before its first libmtc call.
        run.addFileArg(fake.getEmittedBin());
        test_step.dependOn(&run.step);

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

fn libModule(b: *std.Build, config: Config) *std.Build.Module {
    const mod = b.createModule(.{
        .target = config.target,
        .optimize = config.optimize,
        .link_libc = true,
        .pic = true,
        .sanitize_thread = config.tsan,
    });
    mod.addCSourceFiles(.{ .files = &lib_sources, .flags = &lib_flags });
    mod.addIncludePath(b.path("lib/include"));
    mod.addIncludePath(b.path("lib/src"));
    // dlopen and pthreads live in glibc >= 2.34; naming them keeps older
    // glibc targets linking too.
    mod.linkSystemLibrary("pthread", .{});
    mod.linkSystemLibrary("dl", .{});
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
    return b.addExecutable(.{ .name = name, .root_module = mod });
}
