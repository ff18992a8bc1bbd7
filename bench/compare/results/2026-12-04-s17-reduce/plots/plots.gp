set terminal pngcairo size 900,600 noenhanced
set logscale xy
set grid
set key top left
set xlabel 'size (full buffer)'
set xtics ('8 B' 8, '64 B' 64, '1 KiB' 1024, '16 KiB' 16384, '256 KiB' 262144, '4 MiB' 4194304, '64 MiB' 67108864)
set output 'shm2_reduce_busbw.png'
set title 'reduce, 2 ranks, shared memory (1 rank per core)'
set ylabel 'bus bandwidth (GB/s)'
plot 'shm2_reduce_cohort.dat' using 1:3 with linespoints title 'cohort', 'shm2_reduce_ompi.dat' using 1:3 with linespoints title 'Open MPI', 'shm2_reduce_mpich.dat' using 1:3 with linespoints title 'MPICH'
set output 'shm2_reduce_lat.png'
set title 'reduce, 2 ranks, shared memory (1 rank per core)'
set ylabel 'time per op (us)'
plot 'shm2_reduce_cohort.dat' using 1:2 with linespoints title 'cohort', 'shm2_reduce_ompi.dat' using 1:2 with linespoints title 'Open MPI', 'shm2_reduce_mpich.dat' using 1:2 with linespoints title 'MPICH'
set output 'shm2osu_reduce_busbw.png'
set title 'reduce, 2 ranks, shared memory, OSU style (barrier between iterations)'
set ylabel 'bus bandwidth (GB/s)'
plot 'shm2osu_reduce_cohort.dat' using 1:3 with linespoints title 'cohort', 'shm2osu_reduce_ompi.dat' using 1:3 with linespoints title 'Open MPI', 'shm2osu_reduce_mpich.dat' using 1:3 with linespoints title 'MPICH'
set output 'shm2osu_reduce_lat.png'
set title 'reduce, 2 ranks, shared memory, OSU style (barrier between iterations)'
set ylabel 'time per op (us)'
plot 'shm2osu_reduce_cohort.dat' using 1:2 with linespoints title 'cohort', 'shm2osu_reduce_ompi.dat' using 1:2 with linespoints title 'Open MPI', 'shm2osu_reduce_mpich.dat' using 1:2 with linespoints title 'MPICH'
