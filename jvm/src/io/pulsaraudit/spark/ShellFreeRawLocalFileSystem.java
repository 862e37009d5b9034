package io.pulsaraudit.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's raw local file system without a child process per file operation.
 *
 * <p>Without Hadoop's native library (none here: pip's pyspark ships none), the local file
 * system sets a permission by running {@code chmod} and looks for a symbolic link by running
 * {@code readlink}: a child process forked from the driver JVM, some 5 ms each on the 2-core
 * machine. Every file Spark or Delta creates gets a {@code chmod} (and so does its checksum
 * file), and every rename through a {@code FileContext} (each Delta commit, each streaming
 * checkpoint file) a {@code readlink}: some 20 processes per Delta commit, 120-160 per
 * {@code watch} micro-batch (a JFR recording, docs/performance.md "Session 37").
 *
 * <p>Here both are Java calls with the same outcome: the permission bits by
 * {@link Files#setPosixFilePermissions} (following a link, as {@code chmod} does), and a path
 * that is no symbolic link answered by {@link #getFileStatus}, as the original does once
 * {@code readlink} has printed nothing. A sticky bit, a symbolic link, a file system without
 * POSIX permissions or a native library that is there: Hadoop's own code, unchanged.
 */
public class ShellFreeRawLocalFileSystem extends RawLocalFileSystem {
  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    if (NativeIO.isAvailable() || permission.getStickyBit()) {
      super.setPermission(p, permission);
      return;
    }
    java.nio.file.Path file = pathToFile(p).toPath();
    try {
      Files.setPosixFilePermissions(file, PosixFilePermissions.fromString(permission.toString()));
    } catch (UnsupportedOperationException | IllegalArgumentException e) {
      super.setPermission(p, permission);
    }
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    // the original reads the link of new File(f.toString()) (for a qualified path, a
    // "file:/..." name relative to the working directory): the same name is asked here
    boolean link;
    try {
      link = Files.isSymbolicLink(Paths.get(f.toString()));
    } catch (InvalidPathException e) {
      link = true; // let Hadoop's own code say what it is
    }
    return link ? super.getFileLinkStatus(f) : getFileStatus(f);
  }
}
